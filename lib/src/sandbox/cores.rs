//! Cores: each slot's runs pinned to a core of their own.
//!
//! A run's CPU time is what it is timed by, and it varies with where the
//! scheduler puts it: migrations between cores, a core shared with another
//! slot's run, caches warmed by someone else. So, as DOMjudge pins each
//! judgehost, slot `i` (its runs, compiles, checkers and interactors: the
//! auxiliary slot is its worker's) runs on the `i`-th CPU, modulo their
//! count, of the judge's own affinity: whatever `taskset`, systemd's
//! `CPUAffinity=` or a cpuset gave the runner. One worker per core (the
//! default of `judge-exec --workers`) gives each slot a core of its own.
//!
//! The program is pinned by `sched_setaffinity` just before it is started,
//! and cannot move: the seccomp filter fails its own `sched_setaffinity`
//! with `EPERM`. Not a cpuset group: the same pin, but a v2 host would have
//! to delegate one more controller, and each run's init would attach to
//! one more group (v1); an affinity costs one call and holds on every
//! layout, v1, v2 or none. `make bench` shows the effect: the spread of the
//! CPU time of a fixed spin while another slot is busy, pinned and not.

use super::limits::Identity;
use super::slot::{slot_uid_base, AUX_UID_OFFSET};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

static PINNED: AtomicBool = AtomicBool::new(true);

/// Whether runs are pinned (the default); `make bench` turns it off to
/// measure against.
pub fn set_pinned(on: bool) {
    PINNED.store(on, Ordering::Relaxed);
}

pub fn pinned() -> bool {
    PINNED.load(Ordering::Relaxed)
}

/// The CPUs this process may run on, in order: the cores slots are given.
pub fn judge_cpus() -> &'static [u32] {
    static CPUS: OnceLock<Vec<u32>> = OnceLock::new();
    CPUS.get_or_init(|| {
        // SAFETY: a zeroed cpu_set_t is an empty set; the kernel writes at most its size.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: sched_getaffinity writes at most size_of::<cpu_set_t>() bytes, into `set`, a live local.
        if unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) } != 0 {
            return Vec::new();
        }
        // SAFETY: CPU_ISSET reads `set` at an index below CPU_SETSIZE.
        (0..libc::CPU_SETSIZE as u32).filter(|&c| unsafe { libc::CPU_ISSET(c as usize, &set) }).collect()
    })
}

/// The core the runs of `identity`'s slot are pinned to: `None` when runs
/// are not pinned, or run as the caller (no slot uid).
pub fn core_of(identity: Option<Identity>) -> Option<u32> {
    let cpus = judge_cpus();
    if !pinned() || cpus.is_empty() {
        return None;
    }
    let worker = identity?.uid.checked_sub(slot_uid_base())? % AUX_UID_OFFSET;
    Some(cpus[worker as usize % cpus.len()])
}

/// The set holding `core` alone, made before the fork (the child must not
/// allocate).
pub(super) fn only(core: u32) -> libc::cpu_set_t {
    // SAFETY: a zeroed cpu_set_t is an empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: the index is taken modulo CPU_SETSIZE: inside `set`.
    unsafe { libc::CPU_SET(core as usize % libc::CPU_SETSIZE as usize, &mut set) };
    set
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_and_its_auxiliary_share_their_workers_core() {
        let cpus = judge_cpus();
        assert!(!cpus.is_empty());
        let base = slot_uid_base();
        let id = |uid| Some(Identity { uid, gid: uid });
        for worker in 0..4u32 {
            let core = cpus[worker as usize % cpus.len()];
            assert_eq!(core_of(id(base + worker)), Some(core));
            assert_eq!(core_of(id(base + AUX_UID_OFFSET + worker)), Some(core));
        }
        assert_eq!(core_of(None), None, "a run as the caller is not pinned");
        assert_eq!(core_of(id(base - 1)), None, "not a slot uid");
        let set = only(cpus[0]);
        // SAFETY: CPU_ISSET reads `set` at a core number below CPU_SETSIZE.
        assert!(unsafe { libc::CPU_ISSET(cpus[0] as usize, &set) });
        // SAFETY: CPU_COUNT only reads `set`, a live local.
        assert_eq!(unsafe { libc::CPU_COUNT(&set) }, 1);
    }
}
