//! What `/proc` says of a process: the CPU time and resident memory of its
//! tree, its anonymous memory, its run time, its parent and uid. The basic
//! level's watchdog and the cgroup-less measures rest on these.

use super::sys::sysconf;
use std::time::Duration;

/// Bytes of anonymous memory `pid` has now (`/proc/<pid>/statm`: resident
/// less shared pages); 0 if it is gone.
pub(super) fn anon_of(pid: libc::pid_t) -> u64 {
    let statm = std::fs::read_to_string(format!("/proc/{pid}/statm")).unwrap_or_default();
    let pages: Vec<u64> = statm.split_whitespace().filter_map(|f| f.parse().ok()).collect();
    match pages[..] {
        [_, resident, shared, ..] => resident.saturating_sub(shared) * sysconf(libc::_SC_PAGESIZE),
        _ => 0,
    }
}

/// One look at a process tree.
pub(super) struct Sample {
    pub cpu: Duration,
    /// Bytes, summed over the tree's live processes.
    pub resident: u64,
}

/// CPU time and resident memory of `root` and its descendants. Each live
/// process counts its own time plus its reaped children's (`cutime`,
/// `cstime`), so nothing is counted twice. `None` if `root` is gone.
pub(super) fn sample_tree(root: libc::pid_t) -> Option<Sample> {
    let (tick, page) = (sysconf(libc::_SC_CLK_TCK), sysconf(libc::_SC_PAGESIZE));
    let (mut ticks, mut pages, mut seen) = (0u64, 0u64, 0usize);
    let mut todo = vec![root];
    while let Some(pid) = todo.pop() {
        let Some((t, p)) = stat_of(pid) else {
            if pid == root {
                return None;
            }
            continue;
        };
        ticks += t;
        pages += p;
        seen += 1;
        if seen > 4096 {
            break;
        }
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { continue };
        for task in tasks.flatten() {
            if let Ok(kids) = std::fs::read_to_string(task.path().join("children")) {
                todo.extend(kids.split_whitespace().filter_map(|k| k.parse::<libc::pid_t>().ok()));
            }
        }
    }
    let cpu = Duration::from_micros(ticks * 1_000_000 / tick);
    Some(Sample { cpu, resident: pages * page })
}

/// `(utime + stime + cutime + cstime` in ticks, `rss` in pages) of one process.
pub(super) fn stat_of(pid: libc::pid_t) -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // "pid (comm) state ppid …": comm may hold anything, so split after the last ')'.
    let fields: Vec<&str> = stat.get(stat.rfind(')')? + 2..)?.split_whitespace().collect();
    // Field N of proc(5) is fields[N - 3]: utime 14 … cstime 17, rss 24.
    let num = |n: usize| fields.get(n - 3).and_then(|f| f.parse::<u64>().ok());
    Some((num(14)? + num(15)? + num(16)? + num(17)?, num(24)?))
}

/// A process's parent and real uid, from `/proc/<pid>/status` (its owner in
/// `/proc` is root when it is not dumpable, so the file's owner won't do).
pub(super) fn parent_and_uid(pid: libc::pid_t) -> Option<(libc::pid_t, u32)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |key: &str| status.lines().find_map(|l| l.strip_prefix(key))?.split_whitespace().next();
    Some((field("PPid:")?.parse().ok()?, field("Uid:")?.parse().ok()?))
}
