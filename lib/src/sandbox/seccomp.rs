//! The seccomp filter of judged programs (and compilers): a **deny list** of
//! calls no judged program needs, written as classic BPF by hand (about 90
//! instructions; no library): the architecture checked, then a balanced
//! binary search over ranges of call numbers ([`program`]).
//!
//! A deny list rather than an allow list: an allow list breaks good programs
//! whenever the C library starts using a new call (Normal-OJ's C-Sandbox had
//! to add six calls for Ubuntu 22.04's glibc).
//!
//! | call(s) | action |
//! |---|---|
//! | a non-native ABI (i386 `int 0x80`, x32) | the process is killed (`SECCOMP_RET_KILL_PROCESS`) |
//! | a number above [`HIGHEST_KNOWN`] (calls newer than this table) | fails with `ENOSYS`, as on an older kernel: a new kernel cannot widen the sandbox |
//! | `clone3` | fails with `ENOSYS`: glibc then falls back to `clone`, whose flags a filter can see (`clone3`'s are behind a pointer) |
//! | `sched_setaffinity` | fails with `EPERM`: a run stays on the core its slot was given (`cores.rs`) |
//! | `fallocate` | fails with `EOPNOTSUPP`: it reserves disk that no file size shows (`FALLOC_FL_KEEP_SIZE`); glibc's `posix_fallocate` then writes, under `RLIMIT_FSIZE` |
//! | `fadvise64`, `readahead`, `madvise` with `MADV_COLD` or `MADV_PAGEOUT` | succeed and do nothing ([`SHARED_STATE`]): advice about pages a run shares with the host |
//! | `preadv2`, `pwritev2` with `RWF_NOWAIT` | fail with `EOPNOTSUPP`, as on a file that cannot tell: "would block" says whether a page is cached ([`SHARED_STATE`]) |
//! | `socket`/`socketpair` of a family other than [`FAMILIES`], or IP other than TCP or UDP streams and datagrams | **denied** (below), the family named: a network namespace does not cover `AF_VSOCK` and friends, and asking for DCCP or SCTP makes the kernel load their modules |
//! | `fcntl` with a lock, lease or directory-notice command ([`FCNTL_DENIED`]), `setsockopt` of `IPV6_FLOWLABEL_MGR` | **denied**, the command named ([`SHARED_STATE`]) |
//! | `clone`/`unshare` with any `CLONE_NEW*` flag, `clone` with `CLONE_PARENT`, and every call in [`DENIED`] | **denied**: the supervisor (the run's init, or the helper in the kept jail) is notified (`SECCOMP_RET_USER_NOTIF`), names the call, and kills the run: RE, with the call's name in `stderr` |
//! | anything else | allowed |
//!
//! Namespaces, the slot uid and the dropped capabilities already make most
//! of the denied calls fail; the filter makes them fail loudly and closes the
//! kernel's attack surface behind them (`bpf`, `perf_event_open`,
//! `userfaultfd`, `io_uring`, `keyctl`, user namespaces).
//!
//! # State that outlives a run
//!
//! A run's namespaces and cgroup die with it; some kernel state does not,
//! because no namespace holds it: it lives on a file the run shares with
//! the host and the other runs (every file under `/usr`), or in a table
//! counted host-wide. [`SHARED_STATE`] lists each kind and the rule that
//! takes it from a run, so that nothing one run does is seen by another
//! run or takes a quota from the host (`tests/hostile.rs`, `tests/hostile_state.rs`).

use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

/// The denied calls, by name (x86-64 numbers).
pub const DENIED: &[(&str, libc::c_long)] = &[
    ("mount", libc::SYS_mount),
    ("umount2", libc::SYS_umount2),
    ("pivot_root", libc::SYS_pivot_root),
    ("chroot", libc::SYS_chroot),
    ("move_mount", libc::SYS_move_mount),
    ("open_tree", libc::SYS_open_tree),
    ("fsopen", libc::SYS_fsopen),
    ("fsconfig", libc::SYS_fsconfig),
    ("fsmount", libc::SYS_fsmount),
    ("fspick", libc::SYS_fspick),
    ("mount_setattr", libc::SYS_mount_setattr),
    ("ptrace", libc::SYS_ptrace),
    ("process_vm_readv", libc::SYS_process_vm_readv),
    ("process_vm_writev", libc::SYS_process_vm_writev),
    ("bpf", libc::SYS_bpf),
    ("perf_event_open", libc::SYS_perf_event_open),
    ("keyctl", libc::SYS_keyctl),
    ("add_key", libc::SYS_add_key),
    ("request_key", libc::SYS_request_key),
    ("unshare", libc::SYS_unshare),
    ("setns", libc::SYS_setns),
    ("kexec_load", libc::SYS_kexec_load),
    ("kexec_file_load", libc::SYS_kexec_file_load),
    ("reboot", libc::SYS_reboot),
    ("init_module", libc::SYS_init_module),
    ("finit_module", libc::SYS_finit_module),
    ("delete_module", libc::SYS_delete_module),
    ("swapon", libc::SYS_swapon),
    ("swapoff", libc::SYS_swapoff),
    ("acct", libc::SYS_acct),
    ("settimeofday", libc::SYS_settimeofday),
    ("clock_settime", libc::SYS_clock_settime),
    ("clock_adjtime", libc::SYS_clock_adjtime),
    ("adjtimex", libc::SYS_adjtimex),
    ("syslog", libc::SYS_syslog),
    ("quotactl", libc::SYS_quotactl),
    ("open_by_handle_at", libc::SYS_open_by_handle_at),
    ("name_to_handle_at", libc::SYS_name_to_handle_at),
    ("userfaultfd", libc::SYS_userfaultfd),
    ("io_uring_setup", libc::SYS_io_uring_setup),
    ("io_uring_enter", libc::SYS_io_uring_enter),
    ("io_uring_register", libc::SYS_io_uring_register),
    ("fanotify_init", libc::SYS_fanotify_init),
    ("iopl", libc::SYS_iopl),
    ("ioperm", libc::SYS_ioperm),
    ("vhangup", libc::SYS_vhangup),
    ("sethostname", libc::SYS_sethostname),
    ("setdomainname", libc::SYS_setdomainname),
    ("lookup_dcookie", libc::SYS_lookup_dcookie),
    ("uselib", libc::SYS_uselib),
    ("pidfd_getfd", libc::SYS_pidfd_getfd),
    ("quotactl_fd", libc::SYS_quotactl_fd),
    // State on a shared file, or a host-wide table (see SHARED_STATE).
    ("flock", libc::SYS_flock),
    ("inotify_init", libc::SYS_inotify_init),
    ("inotify_init1", libc::SYS_inotify_init1),
    ("inotify_add_watch", libc::SYS_inotify_add_watch),
    ("io_setup", libc::SYS_io_setup),
    ("io_destroy", libc::SYS_io_destroy),
    ("io_getevents", libc::SYS_io_getevents),
    ("io_submit", libc::SYS_io_submit),
    ("io_cancel", libc::SYS_io_cancel),
    ("io_pgetevents", 333),
    ("process_madvise", libc::SYS_process_madvise),
    ("cachestat", 451),
    // Newer than the libc crate's table (x86-64 numbers of Linux 6.8-6.17):
    // the mount API's readers and writers, and inode attributes.
    ("statmount", 457),
    ("listmount", 458),
    ("open_tree_attr", 467),
    ("file_getattr", 468),
    ("file_setattr", 469),
];

/// The highest x86-64 call number this filter was written for (Linux
/// 6.17's `file_setattr`): every number above it fails with `ENOSYS`.
pub const HIGHEST_KNOWN: u32 = 469;

/// Kernel state a run could leave for a later run, read from a concurrent
/// one, or take from the host's quota, because no namespace of the run
/// holds it; each kind, and what the filter does so that a run cannot.
/// (Kinds that a namespace or the cgroup does hold are not listed: System V
/// and POSIX IPC live in the run's IPC namespace, sockets in a network
/// namespace checked between runs, pipes, files and sockets are charged to
/// the run's memory group, tasks to its `pids.max`; per-user counts, such as
/// `pipe-user-pages` and epoll watches, are the slot uid's.)
pub const SHARED_STATE: &[(&str, &str)] = &[
    ("page cache of shared files", "no advice (`fadvise64`, `readahead`, `madvise` COLD/PAGEOUT: no-ops), no probe (`RWF_NOWAIT`: EOPNOTSUPP; `cachestat`, `process_madvise` denied; `mincore` answers only for files the caller may write, since Linux 5.2); what a plain read leaves is a timing channel (ojrunner(7))"),
    ("locks and leases on shared files", "`flock` denied, `fcntl` lock and lease commands denied (FCNTL_DENIED)"),
    ("file watches", "`inotify_init`, `inotify_init1`, `inotify_add_watch` denied, `fcntl(F_NOTIFY)` denied, `fanotify_init` denied"),
    ("native AIO contexts (`fs.aio-max-nr`, host-wide)", "`io_setup` and the rest of its family denied"),
    ("IPv6 flow labels (a host-wide table, lingering past their socket)", "`setsockopt(IPV6_FLOWLABEL_MGR)` denied"),
    ("keys and keyrings (a per-user quota outside every namespace)", "`keyctl`, `add_key`, `request_key` denied"),
];

/// `fcntl` commands that set or read state on a file that other runs may
/// open too: locks (`F_GETLK`, `F_SETLK`, `F_SETLKW` and the open file
/// description's), a lease, a directory notice.
pub const FCNTL_DENIED: &[(&str, u32)] = &[
    ("F_GETLK", libc::F_GETLK as u32),
    ("F_SETLK", libc::F_SETLK as u32),
    ("F_SETLKW", libc::F_SETLKW as u32),
    ("F_OFD_GETLK", libc::F_OFD_GETLK as u32),
    ("F_OFD_SETLK", libc::F_OFD_SETLK as u32),
    ("F_OFD_SETLKW", libc::F_OFD_SETLKW as u32),
    ("F_SETLEASE", libc::F_SETLEASE as u32),
    ("F_NOTIFY", libc::F_NOTIFY as u32),
];

/// `setsockopt`'s level and option that makes an IPv6 flow label: an entry
/// in a host-wide table of 4,096 that lingers after its socket closes and
/// that `/proc/net/ip6_flowlabel` shows to the next run.
const SOL_IPV6: u32 = libc::SOL_IPV6 as u32;
const IPV6_FLOWLABEL_MGR: u32 = libc::IPV6_FLOWLABEL_MGR as u32;

/// The sockets a judged program may open (in its empty network namespace):
/// local ones of any type, and IPv4/IPv6 streams and datagrams (TCP, UDP)
/// for loopback-only servers. Anything else is denied, named.
pub const FAMILIES: &[(&str, u32)] =
    &[("AF_UNIX", libc::AF_UNIX as u32), ("AF_INET", libc::AF_INET as u32), ("AF_INET6", libc::AF_INET6 as u32)];

/// A denied call as the supervisor saw it: its number and first arguments
/// (a `socket`'s family, type and protocol; a `clone`'s flags).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Call {
    pub nr: i32,
    pub args: [u64; 3],
}

/// The name of a denied call (or `syscall <n>`), with the family of a
/// denied `socket` or `socketpair`.
pub fn name_of(call: Call) -> String {
    let nr = call.nr as libc::c_long;
    if nr == libc::SYS_clone {
        return match call.args[0] as u32 & CLONE_NEW_ANY {
            0 => "clone (CLONE_PARENT)".into(),
            _ => "clone (with a namespace flag)".into(),
        };
    }
    if nr == libc::SYS_socket || nr == libc::SYS_socketpair {
        let name = if nr == libc::SYS_socket { "socket" } else { "socketpair" };
        let [family, kind, protocol] = call.args.map(|a| a as u32);
        let family = family_name(family);
        if FAMILIES.iter().any(|(n, _)| *n == family) {
            return format!("{name} (family {family}, type {}, protocol {protocol})", kind & 0xf);
        }
        return format!("{name} (family {family})");
    }
    if nr == libc::SYS_fcntl {
        let cmd = call.args[1] as u32;
        let name = FCNTL_DENIED.iter().find(|(_, c)| *c == cmd).map_or(format!("{cmd}"), |(n, _)| n.to_string());
        return format!("fcntl ({name})");
    }
    if nr == libc::SYS_setsockopt {
        return "setsockopt (IPV6_FLOWLABEL_MGR)".into();
    }
    DENIED.iter().find(|(_, n)| *n == nr).map_or(format!("syscall {nr}"), |(s, _)| s.to_string())
}

/// A socket family's name, as `<sys/socket.h>` spells it.
fn family_name(family: u32) -> String {
    const NAMES: &[(&str, i32)] = &[
        ("AF_UNSPEC", libc::AF_UNSPEC),
        ("AF_UNIX", libc::AF_UNIX),
        ("AF_INET", libc::AF_INET),
        ("AF_AX25", libc::AF_AX25),
        ("AF_IPX", libc::AF_IPX),
        ("AF_APPLETALK", libc::AF_APPLETALK),
        ("AF_X25", libc::AF_X25),
        ("AF_INET6", libc::AF_INET6),
        ("AF_KEY", libc::AF_KEY),
        ("AF_NETLINK", libc::AF_NETLINK),
        ("AF_PACKET", libc::AF_PACKET),
        ("AF_RDS", libc::AF_RDS),
        ("AF_PPPOX", libc::AF_PPPOX),
        ("AF_LLC", libc::AF_LLC),
        ("AF_IB", libc::AF_IB),
        ("AF_MPLS", libc::AF_MPLS),
        ("AF_CAN", libc::AF_CAN),
        ("AF_TIPC", libc::AF_TIPC),
        ("AF_BLUETOOTH", libc::AF_BLUETOOTH),
        ("AF_ALG", libc::AF_ALG),
        ("AF_NFC", libc::AF_NFC),
        ("AF_VSOCK", libc::AF_VSOCK),
        ("AF_KCM", 41),
        ("AF_QIPCRTR", 42),
        ("AF_SMC", 43),
        ("AF_XDP", libc::AF_XDP),
        ("AF_MCTP", 45),
    ];
    NAMES.iter().find(|(_, f)| *f as u32 == family).map_or(format!("{family}"), |(n, _)| n.to_string())
}

const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;
const X32_SYSCALL_BIT: u32 = 0x4000_0000;
const RET_KILL_PROCESS: u32 = 0x8000_0000;
const RET_ERRNO: u32 = 0x0005_0000;
const RET_USER_NOTIF: u32 = 0x7fc0_0000;
const RET_ALLOW: u32 = 0x7fff_0000;
const CLONE_NEW_ANY: u32 = (libc::CLONE_NEWNS
    | libc::CLONE_NEWUTS
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUSER
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWNET
    | libc::CLONE_NEWCGROUP
    | 0x80) as u32; // CLONE_NEWTIME

/// The `clone` flags a run may not use: a namespace of its own, and
/// `CLONE_PARENT` (a child of its parent's, out of its reach: in the kept
/// jail, a child of the helper's, which nothing of the run's would reap).
const CLONE_DENIED: u32 = CLONE_NEW_ANY | libc::CLONE_PARENT as u32;

// BPF opcodes.
const LD_W_ABS: u16 = 0x20;
const JEQ_K: u16 = 0x15;
const JGE_K: u16 = 0x35;
const JSET_K: u16 = 0x45;
const RET_K: u16 = 0x06;
// Offsets in struct seccomp_data: nr, arch, instruction pointer, args[6].
const NR: u32 = 0;
const ARCH: u32 = 4;
const ARG0_LOW: u32 = 16;
const ARG1_LOW: u32 = 24;
const ARG2_LOW: u32 = 32;
const ARG5_LOW: u32 = 56;
const AND_K: u16 = 0x54;

fn stmt(code: u16, k: u32) -> libc::sock_filter {
    libc::sock_filter { code, jt: 0, jf: 0, k }
}

fn jump(code: u16, k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

/// What the filter does with a call number, before any argument is seen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Action {
    Allow,
    /// Denied: the supervisor is notified ([`DENIED`]).
    Notify,
    /// Fails with this `errno`, the program going on (0: succeeds, doing nothing).
    Errno(i32),
    /// A non-native ABI: the process is killed.
    Kill,
    /// Decided by the call's arguments.
    Args(Check),
}

/// The calls whose arguments the filter reads, and what decides each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Check {
    /// `clone`: denied with a `CLONE_NEW*` flag or `CLONE_PARENT` (argument 0).
    Clone,
    /// `socket`, `socketpair`: allowed for [`FAMILIES`] only, IP only as TCP
    /// or UDP streams and datagrams (arguments 0 to 2).
    Socket,
    /// `fcntl`: denied for the commands of [`FCNTL_DENIED`] (argument 1).
    Fcntl,
    /// `setsockopt`: denied for `IPV6_FLOWLABEL_MGR` (arguments 1 and 2).
    Sockopt,
    /// `madvise`: `MADV_COLD` and `MADV_PAGEOUT` do nothing (argument 2).
    Advice,
    /// `preadv2`, `pwritev2`: `RWF_NOWAIT` fails (argument 5).
    NoWait,
}

/// The action for call number `nr` of the x86-64 ABI (the module doc's table).
fn action(nr: u32) -> Action {
    let is = |n: libc::c_long| nr == n as u32;
    if nr >= X32_SYSCALL_BIT {
        Action::Kill
    } else if nr > HIGHEST_KNOWN || is(libc::SYS_clone3) {
        Action::Errno(libc::ENOSYS)
    } else if is(libc::SYS_fallocate) {
        Action::Errno(libc::EOPNOTSUPP)
    } else if is(libc::SYS_fadvise64) || is(libc::SYS_readahead) {
        Action::Errno(0)
    } else if is(libc::SYS_sched_setaffinity) {
        Action::Errno(libc::EPERM)
    } else if is(libc::SYS_clone) {
        Action::Args(Check::Clone)
    } else if is(libc::SYS_socket) || is(libc::SYS_socketpair) {
        Action::Args(Check::Socket)
    } else if is(libc::SYS_fcntl) {
        Action::Args(Check::Fcntl)
    } else if is(libc::SYS_setsockopt) {
        Action::Args(Check::Sockopt)
    } else if is(libc::SYS_madvise) {
        Action::Args(Check::Advice)
    } else if is(libc::SYS_preadv2) || is(libc::SYS_pwritev2) {
        Action::Args(Check::NoWait)
    } else if DENIED.iter().any(|&(_, n)| n as u32 == nr) {
        Action::Notify
    } else {
        Action::Allow
    }
}

/// Every call number (all of `u32`) as ranges of one action, sorted: each
/// is its first number and runs to the next one's (the last to `u32::MAX`).
/// Neighbours with the same action are one range.
fn ranges() -> Vec<(u32, Action)> {
    let mut out: Vec<(u32, Action)> = Vec::new();
    // Past HIGHEST_KNOWN, the action changes only at the x32 bit.
    for nr in (0..=HIGHEST_KNOWN + 1).chain([X32_SYSCALL_BIT]) {
        let a = action(nr);
        if out.last().is_none_or(|&(_, last)| last != a) {
            out.push((nr, a));
        }
    }
    out
}

/// Where a jump goes, before offsets are known.
#[derive(Clone, Copy)]
enum To {
    Next,
    Label(usize),
}

/// A classic BPF program being written: jumps name where they go, and
/// [`Asm::finish`] turns the names into offsets.
#[derive(Default)]
struct Asm {
    ins: Vec<(u16, u32, To, To)>,
    /// The instruction each label names, once bound.
    labels: Vec<Option<usize>>,
    /// One shared `RET` per value returned, and its label.
    rets: Vec<(u32, usize)>,
}

impl Asm {
    fn label(&mut self) -> usize {
        self.labels.push(None);
        self.labels.len() - 1
    }

    /// Binds `l` to the next instruction written.
    fn bind(&mut self, l: usize) {
        self.labels[l] = Some(self.ins.len());
    }

    /// A label naming the next instruction written.
    fn here(&mut self) -> usize {
        let l = self.label();
        self.bind(l);
        l
    }

    fn stmt(&mut self, code: u16, k: u32) {
        self.ins.push((code, k, To::Next, To::Next));
    }

    /// Writes a jump; its index, for destinations known only later.
    fn jump(&mut self, code: u16, k: u32, jt: To, jf: To) -> usize {
        self.ins.push((code, k, jt, jf));
        self.ins.len() - 1
    }

    /// The (one, shared) `RET` of `value`, written at the end.
    fn ret(&mut self, value: u32) -> To {
        if let Some(&(_, l)) = self.rets.iter().find(|&&(v, _)| v == value) {
            return To::Label(l);
        }
        let l = self.label();
        self.rets.push((value, l));
        To::Label(l)
    }

    fn finish(mut self) -> Vec<libc::sock_filter> {
        for (value, l) in std::mem::take(&mut self.rets) {
            self.bind(l);
            self.stmt(RET_K, value);
        }
        let labels = &self.labels;
        let ins = self.ins.iter().enumerate().map(|(i, &(code, k, jt, jf))| {
            let off = |to: To| -> u8 {
                let at = match to {
                    To::Next => i + 1,
                    To::Label(l) => labels[l].expect("every label of the filter is bound"),
                };
                u8::try_from(at - (i + 1)).expect("the filter's jumps go forward, within a byte")
            };
            if code & 0x07 == 0x05 {
                jump(code, k, off(jt), off(jf))
            } else {
                stmt(code, k)
            }
        });
        ins.collect()
    }
}

/// The filter program (see the module doc): the architecture checked, then
/// a balanced binary search over the ranges of call numbers (`ranges`).
/// Installing it, the kernel compiles it (a cost per instruction) and runs
/// it for every call number, to cache the calls it always allows (a cost per
/// instruction walked): a tree of ranges is smaller and shallower than a
/// chain of checks (132 instructions; a call decided by its number walks 11
/// at most). A call decided by its arguments (`clone`, `socket`, `fcntl`,
/// `setsockopt`, `madvise`, `preadv2`) is never cached and walks up to 23
/// each time: tens of nanoseconds, beside the call's own microseconds.
pub fn program() -> Vec<libc::sock_filter> {
    let mut asm = Asm::default();
    let kill = asm.ret(RET_KILL_PROCESS);
    asm.stmt(LD_W_ABS, ARCH);
    asm.jump(JEQ_K, AUDIT_ARCH_X86_64, To::Next, kill);
    asm.stmt(LD_W_ABS, NR);
    let ranges = ranges();
    let checks = [Check::Clone, Check::Socket, Check::Fcntl, Check::Sockopt, Check::Advice, Check::NoWait];
    let labels: Vec<(Check, usize)> = checks.iter().map(|&c| (c, asm.label())).collect();
    let label = |c: Check| labels.iter().find(|&&(x, _)| x == c).map(|&(_, l)| l).expect("every check has a label");
    search(&mut asm, &ranges, &mut |asm, action| match action {
        Action::Allow => asm.ret(RET_ALLOW),
        Action::Notify => asm.ret(RET_USER_NOTIF),
        Action::Errno(e) => asm.ret(RET_ERRNO | e as u32),
        Action::Kill => asm.ret(RET_KILL_PROCESS),
        Action::Args(c) => To::Label(label(c)),
    });
    let (allow, notify) = (asm.ret(RET_ALLOW), asm.ret(RET_USER_NOTIF));
    // clone: its flags (argument 0).
    asm.bind(label(Check::Clone));
    asm.stmt(LD_W_ABS, ARG0_LOW);
    asm.jump(JSET_K, CLONE_DENIED, notify, allow);
    // socket, socketpair: the family (argument 0); for IP, the type
    // (argument 1, less its flags) and the protocol (argument 2): no DCCP,
    // SCTP and the like, whose modules the kernel would load for the asking.
    asm.bind(label(Check::Socket));
    let (ip, protocol) = (asm.label(), asm.label());
    asm.stmt(LD_W_ABS, ARG0_LOW);
    asm.jump(JEQ_K, libc::AF_UNIX as u32, allow, To::Next);
    asm.jump(JEQ_K, libc::AF_INET as u32, To::Label(ip), To::Next);
    asm.jump(JEQ_K, libc::AF_INET6 as u32, To::Label(ip), notify);
    asm.bind(ip);
    asm.stmt(LD_W_ABS, ARG1_LOW);
    asm.stmt(AND_K, 0xf);
    asm.jump(JEQ_K, libc::SOCK_STREAM as u32, To::Label(protocol), To::Next);
    asm.jump(JEQ_K, libc::SOCK_DGRAM as u32, To::Label(protocol), notify);
    asm.bind(protocol);
    asm.stmt(LD_W_ABS, ARG2_LOW);
    asm.jump(JEQ_K, 0, allow, To::Next);
    asm.jump(JEQ_K, libc::IPPROTO_TCP as u32, allow, To::Next);
    asm.jump(JEQ_K, libc::IPPROTO_UDP as u32, allow, notify);
    // fcntl: the command (argument 1; the kernel reads an int, as here).
    asm.bind(label(Check::Fcntl));
    asm.stmt(LD_W_ABS, ARG1_LOW);
    let (&(_, last), rest) = FCNTL_DENIED.split_last().expect("FCNTL_DENIED is not empty");
    for &(_, cmd) in rest {
        asm.jump(JEQ_K, cmd, notify, To::Next);
    }
    asm.jump(JEQ_K, last, notify, allow);
    // setsockopt: the level and the option (arguments 1 and 2).
    asm.bind(label(Check::Sockopt));
    asm.stmt(LD_W_ABS, ARG1_LOW);
    asm.jump(JEQ_K, SOL_IPV6, To::Next, allow);
    asm.stmt(LD_W_ABS, ARG2_LOW);
    asm.jump(JEQ_K, IPV6_FLOWLABEL_MGR, notify, allow);
    // madvise: the advice (argument 2).
    let ignore = asm.ret(RET_ERRNO);
    asm.bind(label(Check::Advice));
    asm.stmt(LD_W_ABS, ARG2_LOW);
    asm.jump(JEQ_K, libc::MADV_COLD as u32, ignore, To::Next);
    asm.jump(JEQ_K, libc::MADV_PAGEOUT as u32, ignore, allow);
    // preadv2, pwritev2: the flags (argument 5).
    asm.bind(label(Check::NoWait));
    asm.stmt(LD_W_ABS, ARG5_LOW);
    let unsupported = asm.ret(RET_ERRNO | libc::EOPNOTSUPP as u32);
    asm.jump(JSET_K, libc::RWF_NOWAIT as u32, unsupported, allow);
    asm.finish()
}

/// Writes the search of the call number (loaded) among `ranges` (sorted,
/// at least one): a balanced tree of `JGE` on the ranges' first numbers,
/// whose leaves go where `to` says for their range's action. Where the
/// search of `ranges` begins.
fn search(asm: &mut Asm, ranges: &[(u32, Action)], to: &mut dyn FnMut(&mut Asm, Action) -> To) -> To {
    if let [(_, action)] = ranges {
        return to(asm, *action);
    }
    let (below, above) = ranges.split_at(ranges.len() / 2);
    let node = asm.here();
    let at = asm.jump(JGE_K, above[0].0, To::Next, To::Next);
    let jf = search(asm, below, to);
    let jt = search(asm, above, to);
    (asm.ins[at].2, asm.ins[at].3) = (jt, jf);
    To::Label(node)
}

/// Installs `prog` on the calling thread (no new privileges must be set) and
/// returns the notification listener. Between fork and exec: no allocation.
pub fn install(prog: &[libc::sock_filter]) -> io::Result<OwnedFd> {
    let fprog = libc::sock_fprog { len: prog.len() as u16, filter: prog.as_ptr() as *mut libc::sock_filter };
    const SET_MODE_FILTER: libc::c_long = 1;
    const FLAG_NEW_LISTENER: libc::c_long = 1 << 3;
    // Not SECCOMP_FILTER_FLAG_SPEC_ALLOW: where the kernel's Spectre v2
    // user mitigation is in seccomp mode, it is what shields the judge and
    // the other runs from this program's branch-predictor games.
    // SAFETY: `fprog` points at `prog`, both alive across the call; the kernel copies the filter.
    let fd = unsafe { libc::syscall(libc::SYS_seccomp, SET_MODE_FILTER, FLAG_NEW_LISTENER, &fprog) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is the listener seccomp just returned; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// `struct seccomp_notif`.
#[repr(C)]
#[derive(Default)]
struct Notif {
    id: u64,
    pid: u32,
    flags: u32,
    nr: i32,
    arch: u32,
    ip: u64,
    args: [u64; 6],
}

/// `struct seccomp_notif_resp`.
#[repr(C)]
struct Resp {
    id: u64,
    val: i64,
    error: i32,
    flags: u32,
}

const IOCTL_NOTIF_RECV: libc::c_ulong = 0xc050_2100; // _IOWR('!', 0, struct seccomp_notif)
const IOCTL_NOTIF_SEND: libc::c_ulong = 0xc018_2101; // _IOWR('!', 1, struct seccomp_notif_resp)

/// Takes one notification from `listener` and answers it with `EPERM`; the
/// denied call. `None` if the notification vanished (its caller died).
pub fn receive(listener: RawFd) -> Option<Call> {
    let mut n = Notif::default();
    // SAFETY: `n` is a live seccomp_notif (repr(C)) the kernel fills.
    if unsafe { libc::ioctl(listener, IOCTL_NOTIF_RECV, &mut n) } != 0 {
        return None;
    }
    let r = Resp { id: n.id, val: 0, error: -libc::EPERM, flags: 0 };
    // SAFETY: `r` is a live seccomp_notif_resp (repr(C)) the kernel reads.
    unsafe { libc::ioctl(listener, IOCTL_NOTIF_SEND, &r) };
    Some(Call { nr: n.nr, args: [n.args[0], n.args[1], n.args[2]] })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The filter's answer for one call (the arguments' low halves, 0 to 5)
    /// as the kernel would run it (the few opcodes it uses), and how many
    /// instructions it ran.
    fn run(p: &[libc::sock_filter], arch: u32, nr: u32, args: [u32; 6]) -> (u32, usize) {
        let (mut pc, mut a, mut steps) = (0, 0, 0);
        loop {
            let ins = p[pc];
            pc += 1;
            steps += 1;
            let branch = |taken: bool| if taken { ins.jt as usize } else { ins.jf as usize };
            match ins.code {
                LD_W_ABS => {
                    a = match ins.k {
                        NR => nr,
                        ARCH => arch,
                        k if (ARG0_LOW..=ARG5_LOW).contains(&k) && (k - ARG0_LOW).is_multiple_of(8) => {
                            args[((k - ARG0_LOW) / 8) as usize]
                        }
                        k => panic!("load of offset {k}"),
                    }
                }
                JEQ_K => pc += branch(a == ins.k),
                AND_K => a &= ins.k,
                JGE_K => pc += branch(a >= ins.k),
                JSET_K => pc += branch(a & ins.k != 0),
                RET_K => return (ins.k, steps),
                c => panic!("opcode {c:#x}"),
            }
        }
    }

    fn decide(p: &[libc::sock_filter], nr: u32, args: [u32; 6]) -> u32 {
        run(p, AUDIT_ARCH_X86_64, nr, args).0
    }

    /// The module doc's table, written out plainly: what the filter must
    /// answer for a call.
    fn table(arch: u32, nr: u32, args: [u32; 6]) -> u32 {
        let is = |n: libc::c_long| nr == n as u32;
        let [a0, a1, a2, _, _, a5] = args;
        let advice = is(libc::SYS_fadvise64)
            || is(libc::SYS_readahead)
            || (is(libc::SYS_madvise) && [libc::MADV_COLD as u32, libc::MADV_PAGEOUT as u32].contains(&a2));
        let nowait = (is(libc::SYS_preadv2) || is(libc::SYS_pwritev2)) && a5 & libc::RWF_NOWAIT as u32 != 0;
        let socket_allowed = a0 == libc::AF_UNIX as u32
            || ([libc::AF_INET as u32, libc::AF_INET6 as u32].contains(&a0)
                && [1, 2].contains(&(a1 & 0xf))
                && [0, 6, 17].contains(&a2));
        let denied = DENIED.iter().any(|&(_, n)| n as u32 == nr)
            || (is(libc::SYS_clone) && a0 & CLONE_DENIED != 0)
            || ((is(libc::SYS_socket) || is(libc::SYS_socketpair)) && !socket_allowed)
            || (is(libc::SYS_fcntl) && FCNTL_DENIED.iter().any(|&(_, c)| c == a1))
            || (is(libc::SYS_setsockopt) && a1 == SOL_IPV6 && a2 == IPV6_FLOWLABEL_MGR);
        if arch != AUDIT_ARCH_X86_64 || nr >= X32_SYSCALL_BIT {
            RET_KILL_PROCESS
        } else if nr > HIGHEST_KNOWN || is(libc::SYS_clone3) {
            RET_ERRNO | libc::ENOSYS as u32
        } else if is(libc::SYS_fallocate) || nowait {
            RET_ERRNO | libc::EOPNOTSUPP as u32
        } else if advice {
            RET_ERRNO
        } else if is(libc::SYS_sched_setaffinity) {
            RET_ERRNO | libc::EPERM as u32
        } else if denied {
            RET_USER_NOTIF
        } else {
            RET_ALLOW
        }
    }

    /// Arguments that decide a call: every flag alone, in every argument the
    /// filter reads, and the families, types, protocols, commands, levels,
    /// options and advice that matter, with flags and high values around.
    fn arguments() -> Vec<[u32; 6]> {
        let mut args = vec![[0; 6], [u32::MAX; 6], [CLONE_DENIED, 0, 0, 0, 0, 0]];
        for i in 0..6 {
            args.extend((0..32).map(|bit| {
                let mut a = [0; 6];
                a[i] = 1 << bit;
                a
            }));
        }
        for family in (0..64u32).chain([255, 0x1_0002, u32::MAX]) {
            for kind in [0, 1, 2, 3, 5, 6, 10, 15, 16, 17, 1 | 0x800 | 0x80000, 2 | 0x80000, 0x13] {
                for protocol in [0, 1, 6, 17, 33, 132, 136, 255, 0x106, u32::MAX] {
                    args.push([family, kind, protocol, 0, 0, 0]);
                }
            }
        }
        for cmd in (0..64).chain(1020..1040).chain([0x1_0005, u32::MAX]) {
            args.push([3, cmd, 0, 0, 0, 0]);
        }
        for level in [0, 1, 6, 17, 41, 0x1_0029, u32::MAX] {
            for option in (0..64).chain([0x1_0020, u32::MAX]) {
                args.push([3, level, option, 0, 0, 0]);
            }
        }
        for advice in (0..32).chain([100, 101, 0x1_0015, u32::MAX]) {
            args.push([0x1000, 4096, advice, 0, 0, 0]);
        }
        for flags in [0, 1, 2, 4, 8, 16, 8 | 1, 0x1_0000, u32::MAX] {
            args.push([3, 0, 1, 0, 0, flags]);
        }
        args
    }

    #[test]
    fn the_program_fits_and_jumps_stay_inside() {
        let p = program();
        assert!(p.len() < 4096);
        for (i, ins) in p.iter().enumerate() {
            if ins.code & 0x07 == 0x05 {
                assert!(i + 1 + (ins.jt.max(ins.jf) as usize) < p.len(), "jump out of the program at {i}");
            }
        }
        assert_eq!(p.last().unwrap().code, RET_K, "the kernel wants a return last");
        assert_eq!(std::mem::size_of::<Notif>(), 80);
        assert_eq!(std::mem::size_of::<Resp>(), 24);
    }

    #[test]
    fn the_filter_decides_every_call_as_the_table_says() {
        let p = program();
        let arches = [AUDIT_ARCH_X86_64, 0x4000_0003, 0xc000_00b7, 0, u32::MAX];
        let all = arguments();
        let few = &all[..3];
        let mut nrs: Vec<u32> = (0..=1023).collect();
        nrs.extend((0..=1023).map(|nr| X32_SYSCALL_BIT | nr));
        nrs.extend([0x3fff_ffff, 0x7fff_ffff, 0x8000_0000, 0xbfff_ffff, 0xffff_fffe, u32::MAX]);
        for arch in arches {
            for &nr in &nrs {
                let by_args = matches!(action(nr), Action::Args(_));
                let args = if arch == AUDIT_ARCH_X86_64 && by_args { &all[..] } else { few };
                for &a in args {
                    assert_eq!(
                        run(&p, arch, nr, a).0,
                        table(arch, nr, a),
                        "arch {arch:#x}, call {nr:#x}, arguments {a:x?}"
                    );
                }
            }
        }
    }

    #[test]
    fn every_call_walks_a_balanced_tree() {
        let p = program();
        let ranges = ranges();
        // The arch, its check, the load of the number, the tree, the return.
        let depth = ranges.len().next_power_of_two().trailing_zeros() as usize;
        let most = 3 + depth + 1;
        for nr in (0..=1023).chain([X32_SYSCALL_BIT, u32::MAX]) {
            if matches!(action(nr), Action::Args(_)) {
                continue;
            }
            let (_, steps) = run(&p, AUDIT_ARCH_X86_64, nr, [0; 6]);
            assert!(steps <= most, "call {nr} walks {steps} instructions, more than {most}");
        }
        assert!(p.len() < ranges.len() + 48, "{} instructions for {} ranges", p.len(), ranges.len());
        // Neighbours merged: io_uring's three calls and the mount API's six
        // (425 to 433) are one range.
        assert!(ranges.contains(&(libc::SYS_io_uring_setup as u32, Action::Notify)));
        assert!(!ranges.iter().any(|&(nr, _)| (426..=433).contains(&nr)), "{ranges:?}");
    }

    /// The real kernel takes the tree and decides as the table says: the
    /// errnos, the notification (with no listener left: `ENOSYS`), what is
    /// allowed, and the kill of an x32 call (which `tests/hostile.rs`, with
    /// `int 0x80` only, does not try).
    #[test]
    fn the_kernel_runs_the_tree_as_the_table_says() {
        let prog = program();
        let errno = || io::Error::last_os_error().raw_os_error().unwrap_or(0);
        // In the child of a threaded process: system calls only, no allocation.
        let checks = || -> i32 {
            // SAFETY: in the forked child: system calls on locals only; nothing allocates or locks.
            unsafe {
                // The kill would dump core otherwise.
                let no_core = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
                if libc::setrlimit(libc::RLIMIT_CORE, &no_core) != 0 {
                    return 9;
                }
                if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                    return 10;
                }
                let Ok(listener) = install(&prog) else { return 11 };
                drop(listener);
                if libc::getppid() <= 0 {
                    return 12;
                }
                // Unfiltered, these fail otherwise (EBADF, EINVAL, EPERM).
                if libc::syscall(libc::SYS_fallocate, -1, 0, 0, 1) != -1 || errno() != libc::EOPNOTSUPP {
                    return 13;
                }
                if libc::syscall(libc::SYS_clone3, 0, 0) != -1 || errno() != libc::ENOSYS {
                    return 14;
                }
                if libc::syscall(HIGHEST_KNOWN as libc::c_long + 1) != -1 || errno() != libc::ENOSYS {
                    return 15;
                }
                if libc::syscall(libc::SYS_ptrace, libc::PTRACE_TRACEME, 0, 0, 0) != -1 || errno() != libc::ENOSYS {
                    return 16;
                }
                if libc::socket(libc::AF_VSOCK, libc::SOCK_STREAM, 0) != -1 || errno() != libc::ENOSYS {
                    return 17;
                }
                if libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0) < 0 {
                    return 18;
                }
                // Advice succeeds doing nothing (on a bad descriptor: EBADF
                // otherwise); a cache probe is not supported; a lock denied.
                if libc::posix_fadvise(-1, 0, 0, libc::POSIX_FADV_DONTNEED) != 0 {
                    return 19;
                }
                if libc::madvise(std::ptr::null_mut(), 4096, libc::MADV_PAGEOUT) != 0 {
                    return 20;
                }
                let iov = libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 };
                if libc::syscall(libc::SYS_preadv2, -1, &iov, 1, 0, 0, libc::RWF_NOWAIT) != -1
                    || errno() != libc::EOPNOTSUPP
                {
                    return 21;
                }
                if libc::syscall(libc::SYS_flock, -1, libc::LOCK_EX) != -1 || errno() != libc::ENOSYS {
                    return 22;
                }
                if libc::syscall(libc::SYS_fcntl, -1, libc::F_GETFD) != -1 || errno() != libc::EBADF {
                    return 23;
                }
                libc::syscall(X32_SYSCALL_BIT as libc::c_long | libc::SYS_getpid);
                24
            }
        };
        // SAFETY: the child only runs `checks` (system calls) and _exits, whatever locks other threads held.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            // SAFETY: _exit takes no pointer; the child ends without unwinding into the test harness.
            unsafe { libc::_exit(checks()) };
        }
        assert!(pid > 0, "fork: {}", io::Error::last_os_error());
        let mut status = 0;
        // SAFETY: waitpid writes only `status`, a live local.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(
            libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGSYS,
            "the filtered child ended with status {status:#x} (an exit code is the check that failed)"
        );
    }

    #[test]
    fn each_kind_of_shared_state_is_taken_from_a_run() {
        let p = program();
        let args = |i: usize, v: u32| {
            let mut a = [0; 6];
            a[i] = v;
            a
        };
        let with = |pairs: &[(usize, u32)]| {
            let mut a = [0; 6];
            for &(i, v) in pairs {
                a[i] = v;
            }
            a
        };
        let nr = |n: libc::c_long| n as u32;
        // Cache advice does nothing; a cache probe fails or is denied.
        assert_eq!(decide(&p, nr(libc::SYS_fadvise64), args(3, libc::POSIX_FADV_DONTNEED as u32)), RET_ERRNO);
        assert_eq!(decide(&p, nr(libc::SYS_readahead), [0; 6]), RET_ERRNO);
        assert_eq!(decide(&p, nr(libc::SYS_madvise), args(2, libc::MADV_PAGEOUT as u32)), RET_ERRNO);
        assert_eq!(decide(&p, nr(libc::SYS_madvise), args(2, libc::MADV_COLD as u32)), RET_ERRNO);
        assert_eq!(decide(&p, nr(libc::SYS_madvise), args(2, libc::MADV_DONTNEED as u32)), RET_ALLOW);
        let nowait = RET_ERRNO | libc::EOPNOTSUPP as u32;
        assert_eq!(decide(&p, nr(libc::SYS_preadv2), args(5, libc::RWF_NOWAIT as u32)), nowait);
        assert_eq!(decide(&p, nr(libc::SYS_pwritev2), args(5, 0x18)), nowait);
        assert_eq!(decide(&p, nr(libc::SYS_preadv2), args(5, libc::RWF_HIPRI as u32)), RET_ALLOW);
        for n in [451, 440] {
            assert_eq!(decide(&p, n, [0; 6]), RET_USER_NOTIF, "cachestat, process_madvise");
        }
        // Locks, leases, watches, AIO, flow labels, keys: denied.
        for &(name, cmd) in FCNTL_DENIED {
            assert_eq!(decide(&p, nr(libc::SYS_fcntl), args(1, cmd)), RET_USER_NOTIF, "{name}");
        }
        for cmd in [libc::F_GETFL, libc::F_SETFD, libc::F_DUPFD_CLOEXEC, libc::F_GETLEASE, libc::F_SETPIPE_SZ] {
            assert_eq!(decide(&p, nr(libc::SYS_fcntl), args(1, cmd as u32)), RET_ALLOW, "fcntl {cmd}");
        }
        let flowlabel = with(&[(1, SOL_IPV6), (2, IPV6_FLOWLABEL_MGR)]);
        assert_eq!(decide(&p, nr(libc::SYS_setsockopt), flowlabel), RET_USER_NOTIF);
        let v6only = with(&[(1, SOL_IPV6), (2, libc::IPV6_V6ONLY as u32)]);
        assert_eq!(decide(&p, nr(libc::SYS_setsockopt), v6only), RET_ALLOW);
        let reuse = with(&[(1, libc::SOL_SOCKET as u32), (2, IPV6_FLOWLABEL_MGR)]);
        assert_eq!(decide(&p, nr(libc::SYS_setsockopt), reuse), RET_ALLOW, "SO_RCVBUFFORCE is 32 too");
        for n in [
            libc::SYS_flock,
            libc::SYS_inotify_init,
            libc::SYS_inotify_init1,
            libc::SYS_inotify_add_watch,
            libc::SYS_fanotify_init,
            libc::SYS_io_setup,
            libc::SYS_io_submit,
            libc::SYS_io_getevents,
            libc::SYS_keyctl,
            libc::SYS_add_key,
        ] {
            assert_eq!(decide(&p, nr(n), [0; 6]), RET_USER_NOTIF, "call {n}");
        }
    }

    #[test]
    fn every_denied_call_and_namespace_clone_is_notified() {
        let p = program();
        for &(name, n) in DENIED {
            assert_eq!(decide(&p, n as u32, [0; 6]), RET_USER_NOTIF, "{name}");
        }
        for nr in [457, 458, 467, 468, 469] {
            assert_eq!(decide(&p, nr, [0; 6]), RET_USER_NOTIF, "call {nr}, newer than libc's table");
        }
        let clone = libc::SYS_clone as u32;
        assert_eq!(decide(&p, clone, [libc::CLONE_NEWUSER as u32, 0, 0, 0, 0, 0]), RET_USER_NOTIF);
        assert_eq!(decide(&p, clone, [libc::SIGCHLD as u32, 0, 0, 0, 0, 0]), RET_ALLOW);
        assert_eq!(decide(&p, X32_SYSCALL_BIT | 1, [0; 6]), RET_KILL_PROCESS);
        assert_eq!(run(&p, 0x4000_0003, 1, [0; 6]).0, RET_KILL_PROCESS, "i386");
        // A binary search: no call walks more than a few dozen instructions.
        assert!(p.len() < 2 * DENIED.len() + 40, "{} instructions", p.len());
    }

    #[test]
    fn names() {
        let call = |nr: libc::c_long, arg0: u64| name_of(Call { nr: nr as i32, args: [arg0, 0, 0] });
        assert_eq!(call(libc::SYS_ptrace, 0), "ptrace");
        assert_eq!(call(libc::SYS_mount, 0), "mount");
        assert_eq!(call(458, 0), "listmount");
        assert_eq!(call(451, 0), "cachestat");
        assert_eq!(call(libc::SYS_io_setup, 0), "io_setup");
        assert!(call(libc::SYS_clone, 0).starts_with("clone"));
        assert_eq!(call(libc::SYS_socket, libc::AF_VSOCK as u64), "socket (family AF_VSOCK)");
        assert_eq!(call(libc::SYS_socketpair, 99), "socketpair (family 99)");
        let dccp = Call { nr: libc::SYS_socket as i32, args: [libc::AF_INET6 as u64, 6, 33] };
        assert_eq!(name_of(dccp), "socket (family AF_INET6, type 6, protocol 33)");
        let lock = Call { nr: libc::SYS_fcntl as i32, args: [3, libc::F_OFD_SETLK as u64, 0] };
        assert_eq!(name_of(lock), "fcntl (F_OFD_SETLK)");
        let notify = Call { nr: libc::SYS_fcntl as i32, args: [3, libc::F_NOTIFY as u64, 0] };
        assert_eq!(name_of(notify), "fcntl (F_NOTIFY)");
        let label = Call { nr: libc::SYS_setsockopt as i32, args: [3, 41, 32] };
        assert_eq!(name_of(label), "setsockopt (IPV6_FLOWLABEL_MGR)");
    }
}
