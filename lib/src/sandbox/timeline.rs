//! A run's timeline: the moment each step of one sandboxed run ended, for
//! `make bench`'s cost per step (issue #16), so that a host where the
//! sandbox is slower shows where its time goes.
//!
//! Off unless the judge asks ([`set_timed`](super::helper::set_timed)):
//! then every process of the run (the judge, the helper, the jail's init
//! and the program until its `exec`) stamps `CLOCK_MONOTONIC`, one clock
//! for the whole host, into one [`Stamps`] (init and the program share the
//! helper's memory), and the run's [`Usage`](super::Usage) carries the
//! [`Timeline`] back. Off, a stamp is one branch.

use serde::{Deserialize, Serialize};
use std::cell::Cell;
use std::time::Duration;

/// The end of each step, in the order a run passes them. The step that
/// ends at a mark is the time since the mark before it ([`Timeline::steps`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
pub enum Mark {
    /// The last run's reply was sent: its cleanup began.
    LastReplied,
    /// The last run's init exited (its namespaces torn down) and was
    /// reaped (a fresh jail's; the kept jail has none).
    LastInitReaped,
    /// The last run's leftovers were taken away: the kept jail cleaned, or
    /// a fresh jail's mount points taken from the template.
    LastTidied,
    /// The judge called [`run`](super::run).
    Called,
    /// The judge sealed the input and made the output pipes: the request
    /// goes now (stamped before the send, lest the helper's stamp come first).
    Sent,
    /// The helper received the request.
    Received,
    /// The slot's lock is held.
    SlotLocked,
    /// The template's `passwd` and the helper's network namespace checked.
    Checked,
    /// The run's cgroup reset.
    CgroupReset,
    /// The jail's arguments made (rlimits, strings, watchdog).
    Prepared,
    /// The run's supervisor runs: init, in its new namespaces, or the
    /// helper itself in the kept jail.
    InitStarted,
    /// init (or, kept, the program) joined the run's cgroup and made its
    /// cgroup namespace.
    Joined,
    /// init finished the run's root (`/tmp`, `/proc`, binds, `pivot_root`);
    /// kept, the program joined the kept mount namespace and set its
    /// `oom_score_adj`.
    RootEntered,
    /// The program runs (a `clone` of its supervisor sharing its memory;
    /// kept, stamped after the two steps above, which it makes itself).
    ProgramStarted,
    /// The program's stdio, directory, rlimits and identity set.
    Credentials,
    /// The program's seccomp filter installed and its listener sent.
    Filtered,
    /// The supervisor saw the `exec` succeed.
    Execed,
    /// The supervisor saw the program exit.
    Exited,
    /// The supervisor killed (and init reaped) what was left, and reported.
    Reaped,
    /// The helper, resumed once init released their memory (kept: at once).
    Resumed,
    /// The run measured (its cgroup read), the reply about to be sent.
    Measured,
    /// The judge has the reply.
    Answered,
    /// The judge finished copying the outputs and returns.
    Returned,
}

/// How many marks a timeline has.
pub const MARKS: usize = Mark::Returned as usize + 1;

impl Mark {
    pub const ALL: [Mark; MARKS] = [
        Mark::LastReplied,
        Mark::LastInitReaped,
        Mark::LastTidied,
        Mark::Called,
        Mark::Sent,
        Mark::Received,
        Mark::SlotLocked,
        Mark::Checked,
        Mark::CgroupReset,
        Mark::Prepared,
        Mark::InitStarted,
        Mark::Joined,
        Mark::RootEntered,
        Mark::ProgramStarted,
        Mark::Credentials,
        Mark::Filtered,
        Mark::Execed,
        Mark::Exited,
        Mark::Reaped,
        Mark::Resumed,
        Mark::Measured,
        Mark::Answered,
        Mark::Returned,
    ];

    /// The step that ends at this mark, in words (`None`: no step does,
    /// the first mark of each chain).
    pub fn step(self) -> Option<&'static str> {
        Some(match self {
            Mark::LastReplied | Mark::Called => return None,
            Mark::LastInitReaped => "teardown: a fresh jail's init reaped",
            Mark::LastTidied => "teardown: the kept jail cleaned",
            Mark::Sent => "judge: seal stdin, pipes",
            Mark::Received => "the request sent and received",
            Mark::SlotLocked => "lock the slot",
            Mark::Checked => "passwd, netns check, the helper's core",
            Mark::CgroupReset => "cgroup reset",
            Mark::Prepared => "jail's arguments",
            Mark::InitStarted => "clone init (a fresh jail's)",
            Mark::Joined => "clone the program, join the cgroup",
            Mark::RootEntered => "the root: setns, oom_score_adj",
            Mark::ProgramStarted => "clone the program (a fresh jail's)",
            Mark::Credentials => "stdio, rlimits, uid, no_new_privs",
            Mark::Filtered => "seccomp filter",
            Mark::Execed => "exec",
            Mark::Exited => "the program runs (watched)",
            Mark::Reaped => "reap, report",
            Mark::Resumed => "init releases the helper (fresh)",
            Mark::Measured => "measure (cgroup reads)",
            Mark::Answered => "reply to the judge",
            Mark::Returned => "judge: outputs drained",
        })
    }
}

/// Now on the host's monotonic clock, in ns (0 never is).
pub fn now_ns() -> u64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes only `t`, a live local.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    (t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64).max(1)
}

/// The marks of one run as they are made, in memory the helper shares with
/// init and the program: each writes its own (raw stores, no allocation,
/// sound between `clone` and `exec`).
#[derive(Debug, Default)]
pub struct Stamps {
    on: Cell<bool>,
    at: [Cell<u64>; MARKS],
}

impl Stamps {
    /// Starts a run's stamps (all cleared), on or off.
    pub fn begin(&self, on: bool) {
        self.on.set(on);
        for c in &self.at {
            c.set(0);
        }
    }

    /// Stamps `m` now, if on.
    pub fn mark(&self, m: Mark) {
        if self.on.get() {
            self.at[m as usize].set(now_ns());
        }
    }

    /// Stamps `m` at `ns`, if on.
    pub fn set(&self, m: Mark, ns: u64) {
        if self.on.get() {
            self.at[m as usize].set(ns);
        }
    }

    /// What was stamped, if on.
    pub fn timeline(&self) -> Option<Timeline> {
        self.on.get().then(|| Timeline { at: std::array::from_fn(|i| self.at[i].get()) })
    }
}

/// The marks one run reached, ns on the host's monotonic clock (0: not
/// reached: a step skipped, as the basic level skips the jail's).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Timeline {
    pub at: [u64; MARKS],
}

impl Timeline {
    /// Each step reached and what it took: the time since the last mark
    /// reached before it, within its chain (the last run's cleanup, then
    /// this run).
    pub fn steps(&self) -> Vec<(Mark, Duration)> {
        let mut out = Vec::new();
        let mut last = 0;
        for m in Mark::ALL {
            let t = self.at[m as usize];
            if m.step().is_none() {
                last = t;
                continue;
            }
            if t == 0 {
                continue;
            }
            if last != 0 {
                out.push((m, Duration::from_nanos(t.saturating_sub(last))));
            }
            last = t;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_are_the_gaps_between_the_marks_reached_within_each_chain() {
        let s = Stamps::default();
        s.begin(false);
        s.mark(Mark::Called);
        assert_eq!(s.timeline(), None, "off, nothing is kept");
        s.begin(true);
        // Each mark set, and the step it ends (none: it starts a chain).
        let marks = [
            (Mark::LastReplied, 100, None),
            (Mark::LastInitReaped, 300, Some(200)),
            (Mark::LastTidied, 350, Some(50)),
            (Mark::Called, 10_000, None),
            (Mark::Sent, 10_100, Some(100)),
            (Mark::Received, 10_400, Some(300)),
            // The basic level: no jail's marks.
            (Mark::Exited, 20_400, Some(10_000)),
            (Mark::Measured, 20_500, Some(100)),
        ];
        for (m, at, _) in marks {
            s.set(m, at);
        }
        let ns = |d: Duration| d.as_nanos() as u64;
        let got: Vec<(Mark, u64)> = s.timeline().unwrap().steps().into_iter().map(|(m, d)| (m, ns(d))).collect();
        let want: Vec<(Mark, u64)> = marks.iter().filter_map(|&(m, _, step)| Some((m, step?))).collect();
        assert_eq!(got, want);
        assert_eq!(Mark::ALL.iter().enumerate().filter(|(i, m)| **m as usize != *i).count(), 0);
    }
}
