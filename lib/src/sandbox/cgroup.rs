//! Control groups: one group per run, for its memory limit and peak, its CPU
//! time, its number of tasks, and a way to find every process it left.
//!
//! Two layouts are supported, chosen once by [`Hierarchy::detect`]:
//!
//! | layout | when | files used |
//! |---|---|---|
//! | v2 | a cgroup2 mount whose root offers `memory`, `pids` and `cpu` (or no v1 memory mount beside it) | `memory.max`, `memory.peak`, `memory.stat`, `memory.events`, `pids.max`, `pids.current`, `cpu.stat` |
//! | v1 | separate `memory`, `pids` and `cpuacct` mounts under `/sys/fs/cgroup` | `memory.limit_in_bytes`, `memory.memsw.limit_in_bytes`, `memory.max_usage_in_bytes`, `memory.stat`, `memory.oom_control`, `pids.max`, `pids.current`, `cpuacct.usage` |
//!
//! Without either (not root, no controllers) the sandbox falls back to
//! rlimits and `/proc` sampling alone.
//!
//! Each helper has one group (`ojrunner/helper-<pid>`), reset before each
//! of its runs ([`Group::reset`]: a helper serves one run at a time, and the
//! run's PID namespace is empty when the run is over) and removed when the
//! helper exits; a new helper removes the groups of dead ones.
//!
//! Not a group made and removed per run, though that reads simpler: the
//! run's first process would have to migrate into it (below: up to 12 ms at
//! the 99th percentile, unless a `favordynmods` cgroup mount makes the
//! kernel favour migrations, a machine-wide switch that Linux 6.18 keeps
//! until reboot); `mkdir` and `rmdir` of three v1 groups, the memory one
//! with some thirty files, cost 0.19 ms of wall time (`make bench` prints
//! it) and more of CPU in the kernel's workers; and a removed memory group
//! lingers in the kernel as a "dying" cgroup until the page cache charged
//! to it (the run's output files) is reclaimed. A working version, on the
//! branch `alt/cgroup-per-run`, judged 0.77 of the cases per second of this
//! one in interleaved runs (BENCHMARKS.md). What a fresh
//! group would give a run, the reused one gives too: no task of the last
//! run is left in it (init, or the helper in the kept jail, kills them all
//! before answering; [`Group::kill_all`] is a second belt), the peak and the CPU time start from zero (once the last
//! run's late-freed memory is gone, `Group::settled`), the OOM count
//! from a baseline, and its limits are the run's own (`tests/judging.rs`).
//!
//! # Each run's init (or program) joins the group; the helper never does
//!
//! The group's OOM killer picks among the tasks in the group. Were the
//! helper in it (as it was, to spare each run a migration), a run that
//! leaves the group full once its own processes are gone (its `/tmp`, a
//! compiler's late-freed memory) has the helper killed next, unless the
//! helper could set its `oom_score_adj` to -1000, which takes
//! `CAP_SYS_RESOURCE` (containers withhold it): a JE a submission caused.
//! So the helper stays where it started, and each run's init joins the
//! group first thing ([`Group::join`], one `write` of `0` to each
//! membership file held open), then makes a cgroup namespace there: the
//! program is born in the group and sees `/` as its cgroup. Its tasks are
//! init (a vfork child sharing the helper's memory, which the OOM killer
//! skips, and whose page faults are charged to the helper's group, the
//! owner of that memory) and the run's. In the kept jail there is no init:
//! the program joins the group itself before its `exec` (a vfork child of
//! the helper's, as init was), and its tasks are the run's alone.
//!
//! What that costs: moving a process between cgroups (`cgroup.procs`)
//! takes the kernel's global `cgroup_threadgroup_rwsem` for writing, which
//! waits for an RCU grace period when no other migration happened in the
//! last few milliseconds: 5 to 16 ms on this kind of machine, 1 run in 10
//! when runs are 20 ms apart. Moving the calling thread alone does not take
//! it: init, single-threaded, writes `0` to v1's `tasks` files (0.02 ms
//! at p50 and 0.14 ms at p99 whatever the gap, on Linux 6.18; `make bench`
//! prints the step, "init joins the run's cgroup"). v2 has no such file
//! for a domain group: there init writes `cgroup.procs` and may wait.
//!
//! The group's counters hold init's share, which the caller takes out: its
//! CPU time since it joined (the watchdog subtracts it), a few kernel pages
//! (absorbed by [`Baseline::resident`]); `pids.max` has
//! [`RESIDENT_TASKS`] more for init.
//!
//! v1's groups live in `ojrunner/` below the cgroup the judge itself is in,
//! per controller; v2's in the cgroup the runner was started in
//! (`delegation.rs`: `/ojrunner` when that is the root).
//!
//! # What "peak memory" means
//!
//! The kernel's peak (`memory.max_usage_in_bytes`, `memory.peak`) counts
//! every page charged to the group, page cache included: the first run of a
//! Python program is charged for reading the standard library. So the peak
//! reported is the kernel's peak minus the clean file cache charged at the
//! end of the run ([`Group::file_cache`]). For a judged run that cache can
//! only be what it *read*: it has no writable file on a disk (its outputs
//! are pipes the judge drains, `streams.rs`; its binds are read-only; `/tmp`
//! is tmpfs), so no page it wrote or mapped writable is ever subtracted:
//! `/tmp` and shared memory ("shmem") stay counted, as they are memory. (A
//! compile writes its binary to its writable `/src`: those pages count
//! while dirty, and not once written back.) The hard limit is set [`SLACK`] above the task's limit so
//! a program that passes the limit is seen passing it (MLE) rather than
//! stopped just short of it.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::delegation::{is_real_root, own_cgroup, prepare, Layout, Refused, CONTROLLERS};
use super::sys::{annotate, reread};

/// How far above the task's memory limit the kernel's hard limit is set.
pub const SLACK: u64 = 4 << 20;

/// Tasks in a run's group that are not the run's: the jail's init.
pub const RESIDENT_TASKS: u64 = 1;

/// How long a reset waits for the last run's late-freed memory.
const SETTLE: Duration = Duration::from_millis(250);

/// A charge this far above the caller's least is a run's late-freed memory
/// to wait for (`Group::settled`); a jailed run leaves up to 2.5 MiB
/// (4,608 resets in `make bench`), which is not waited for. So a run may
/// read up to this much of the last run's memory on top of its own, when
/// the kernel frees that during the run; more, if the kernel takes longer
/// than `SETTLE` to free a bigger leftover.
pub const UNSETTLED: u64 = 4 << 20;

/// How close to its least the caller's charge is once settled.
const SETTLED: u64 = 2 << 20;

/// What [`Group::reset`] found in the group before a run.
#[derive(Clone, Copy, Debug, Default)]
pub struct Baseline {
    /// The OOM-kill count so far (it cannot be reset).
    pub oom_kills: u64,
    /// Bytes charged to the group that are not file cache (kernel memory of
    /// earlier runs not yet freed, init's few pages): not the run's.
    pub resident: u64,
}

/// Which cgroup interface is in use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    V1,
    V2,
}

/// Where runs' groups are made: one directory per controller (v1) or one
/// directory for all (v2).
#[derive(Clone, Debug)]
pub struct Hierarchy {
    pub kind: Kind,
    /// v1: `memory`, `pids`, `cpuacct` parents; v2: the one parent three times.
    memory: PathBuf,
    pids: PathBuf,
    cpu: PathBuf,
    /// v2: where the groups live and why (`delegation.rs`).
    pub layout: Option<Layout>,
}

/// One run's group(s).
#[derive(Debug)]
pub struct Group {
    kind: Kind,
    memory: PathBuf,
    pids: PathBuf,
    cpu: PathBuf,
    /// The membership files init writes `0` to, held open, one per
    /// distinct directory: v1's `tasks` (a thread's own move), v2's
    /// `cgroup.procs`.
    procs: Vec<File>,
    /// `cpuacct.usage` (v1, open for its reset too) or `cpu.stat` (v2),
    /// held open: read from inside the jail too, where the cgroup file
    /// system is not mounted.
    cpu_file: File,
    /// The hard memory limit and `pids.max` last written: a run with the
    /// same limits as the last one writes neither again.
    applied: std::cell::RefCell<Option<(String, String)>>,
    /// The OOM-kill count read after the last run: the next run's baseline
    /// (nothing runs in between).
    oom_read: std::cell::Cell<Option<u64>>,
    /// v2: `cpu.stat`'s `usage_usec` never goes back to zero; its value at
    /// the reset is subtracted.
    cpu_base: std::cell::Cell<Duration>,
    /// `memory.max_usage_in_bytes` (v1) or `memory.peak` (v2), held open
    /// for its reset: v2's only since Linux 6.12, where a write resets the
    /// peak as read through the same descriptor (and only that one).
    peak: Option<File>,
    /// v2: whether that reset worked for this run (else no peak is known).
    peak_reset: std::cell::Cell<bool>,
    /// The files every run reads or resets, held open: a walk of a deep
    /// cgroup path is paid once per helper, not nine times a run (`make
    /// bench`'s cost per step).
    files: Files,
    /// The least charge (file cache aside) seen at a reset: the caller's
    /// own, with nothing of a run left (see [`Group::reset`]).
    floor: std::cell::Cell<Option<u64>>,
    /// `pids.current`, held open: whether a run left a task ([`Group::tasks`]).
    tasks: File,
}

/// A group's files read (or, v1, reset) at every run.
#[derive(Debug)]
struct Files {
    /// `memory.usage_in_bytes` (v1), `memory.current` (v2).
    usage: File,
    /// `memory.stat`.
    stat: File,
    /// `memory.oom_control` (v1), `memory.events` (v2).
    events: File,
}

impl Files {
    fn open(kind: Kind, memory: &Path) -> io::Result<Files> {
        let read = |f: &str| File::open(memory.join(f)).map_err(|e| annotate(e, &memory.join(f)));
        Ok(match kind {
            Kind::V1 => Files {
                usage: read("memory.usage_in_bytes")?,
                stat: read("memory.stat")?,
                events: read("memory.oom_control")?,
            },
            Kind::V2 => {
                Files { usage: read("memory.current")?, stat: read("memory.stat")?, events: read("memory.events")? }
            }
        })
    }
}

/// A kernel file open for reading and writing (a counter it resets).
fn read_write(path: &Path) -> io::Result<File> {
    OpenOptions::new().read(true).write(true).open(path).map_err(|e| annotate(e, path))
}

/// A kernel file's number, read again from its start.
fn reread_u64(f: &File) -> Option<u64> {
    reread(f, &mut [0u8; 32])?.trim().parse().ok()
}

/// Writes `value` to a kernel file held open (from its start).
fn rewrite(f: &File, value: &str) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    f.write_at(value.as_bytes(), 0).map(drop)
}

impl Hierarchy {
    /// The hierarchy this machine offers to root, if any (see
    /// [`Hierarchy::find`]; a refusal is said on stderr, and there is none).
    pub fn detect() -> Option<Hierarchy> {
        Hierarchy::find().unwrap_or_else(|e| {
            eprintln!("ojrunner-sandbox: {e}");
            None
        })
    }

    /// The hierarchy this machine offers to root: v2 where its root offers
    /// the controllers (or where there is no v1 to fall back to), in the
    /// layout of `delegation.rs`, made ready; else v1, with the `ojrunner`
    /// parents made. `None` without root or without cgroups; `Err` where v2
    /// is there but not the runner's to use (exit 100 at start).
    pub fn find() -> Result<Option<Hierarchy>, Refused> {
        if !nix::unistd::geteuid().is_root() {
            return Ok(None);
        }
        let mounts = fs::read_to_string("/proc/self/mounts").unwrap_or_default();
        let own = fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        match Hierarchy::v2(&mounts, &own)? {
            Some(h) => Ok(Some(h)),
            None => Ok(Hierarchy::v1(&mounts, &own)),
        }
    }

    fn v2(mounts: &str, own: &str) -> Result<Option<Hierarchy>, Refused> {
        let mount_of = |kind: &str, option: Option<&str>| {
            mounts.lines().find_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                let opted = option.is_none_or(|o| f.get(3).is_some_and(|opts| opts.split(',').any(|x| x == o)));
                (f.get(2) == Some(&kind) && opted).then(|| PathBuf::from(f[1]))
            })
        };
        let Some(root) = mount_of("cgroup2", None) else { return Ok(None) };
        let offered = fs::read_to_string(root.join("cgroup.controllers")).unwrap_or_default();
        let has = |c: &str| offered.split_whitespace().any(|x| x == c);
        // A hybrid host: the controllers are v1's.
        if !CONTROLLERS.iter().all(|c| has(c)) && mount_of("cgroup", Some("memory")).is_some() {
            return Ok(None);
        }
        let layout = Layout::of(own_cgroup(own).unwrap_or("/"), is_real_root(&root));
        let base = prepare(&root, &layout)?;
        Ok(Some(Hierarchy {
            kind: Kind::V2,
            memory: base.clone(),
            pids: base.clone(),
            cpu: base,
            layout: Some(layout),
        }))
    }

    fn v1(mounts: &str, own: &str) -> Option<Hierarchy> {
        // "hierarchy-id:controllers:path" lines of /proc/self/cgroup.
        let own_path = |controller: &str| {
            own.lines()
                .find_map(|l| {
                    let mut p = l.splitn(3, ':');
                    let (_, ctrls, path) = (p.next()?, p.next()?, p.next()?);
                    ctrls.split(',').any(|c| c == controller).then(|| path.trim_start_matches('/').to_string())
                })
                .unwrap_or_default()
        };
        let dir = |controller: &str| -> Option<PathBuf> {
            let mount = mounts.lines().find_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                (f.get(2) == Some(&"cgroup") && f.get(3)?.split(',').any(|o| o == controller))
                    .then(|| PathBuf::from(f[1]))
            })?;
            let own = mount.join(own_path(controller));
            let base = own.join("ojrunner");
            ensure_dir(&base).ok()?;
            Some(base)
        };
        let (memory, pids, cpu) = (dir("memory")?, dir("pids")?, dir("cpuacct")?);
        Some(Hierarchy { kind: Kind::V1, memory, pids, cpu, layout: None })
    }

    /// The directories the runs' groups are made in: one per controller
    /// (v1), or the one (v2).
    pub fn parents(&self) -> Vec<&Path> {
        let mut dirs = vec![self.memory.as_path(), self.pids.as_path(), self.cpu.as_path()];
        dirs.dedup();
        dirs
    }

    /// Removes the groups `helper-<pid>` of helpers that died without
    /// cleaning up (their processes are killed first).
    pub fn remove_stale(&self) {
        let mut dirs = vec![self.memory.clone(), self.pids.clone(), self.cpu.clone()];
        dirs.dedup();
        for parent in dirs {
            for e in fs::read_dir(&parent).into_iter().flatten().flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                let Some(pid) = helper_of(&name) else { continue };
                let status = fs::read_to_string(Path::new("/proc").join(pid).join("status")).unwrap_or_default();
                if status.is_empty() || status.contains("State:\tZ") {
                    for _ in 0..100 {
                        if kill_procs(&e.path()) == 0 {
                            break;
                        }
                        std::thread::sleep(Duration::from_millis(2));
                    }
                    let _ = fs::remove_dir(e.path());
                }
            }
        }
    }

    /// Makes the group `name` with the given limits (bytes of memory, tasks
    /// of the run: [`RESIDENT_TASKS`] are added).
    pub fn create(&self, name: &str, memory: u64, tasks: Option<u64>) -> io::Result<Group> {
        let (m, p, c) = (self.memory.join(name), self.pids.join(name), self.cpu.join(name));
        let mut dirs = vec![m.clone(), p.clone(), c.clone()];
        dirs.dedup();
        for d in &dirs {
            // A leftover of a crashed judge: empty it first.
            if d.exists() {
                kill_procs(d);
                let _ = fs::remove_dir(d);
            }
            fs::create_dir(d).map_err(|e| annotate(e, d))?;
        }
        let cpu_path = c.join(match self.kind {
            Kind::V1 => "cpuacct.usage",
            Kind::V2 => "cpu.stat",
        });
        let (cpu_file, peak) = match self.kind {
            Kind::V1 => (read_write(&cpu_path)?, Some(read_write(&m.join("memory.max_usage_in_bytes"))?)),
            Kind::V2 => {
                let cpu_file = File::open(&cpu_path).map_err(|e| annotate(e, &cpu_path))?;
                (cpu_file, read_write(&m.join("memory.peak")).ok())
            }
        };
        let files = Files::open(self.kind, &m)?;
        let count = File::open(p.join("pids.current")).map_err(|e| annotate(e, &p.join("pids.current")))?;
        let g = Group {
            tasks: count,
            kind: self.kind,
            files,
            cpu_file,
            procs: dirs
                .iter()
                .map(|d| {
                    let file = d.join(match self.kind {
                        Kind::V1 => "tasks",
                        Kind::V2 => "cgroup.procs",
                    });
                    OpenOptions::new().write(true).open(&file).map_err(|e| annotate(e, &file))
                })
                .collect::<io::Result<_>>()?,
            memory: m,
            pids: p,
            cpu: c,
            applied: Default::default(),
            oom_read: Default::default(),
            cpu_base: Default::default(),
            peak,
            peak_reset: Default::default(),
            floor: Default::default(),
        };
        let hard = memory.saturating_add(SLACK).to_string();
        match self.kind {
            Kind::V1 => {
                write(&g.memory, "memory.limit_in_bytes", &hard)?;
                // Absent without swap accounting; must not be below the limit above.
                let _ = write(&g.memory, "memory.memsw.limit_in_bytes", &hard);
                let _ = write(&g.memory, "memory.swappiness", "0");
            }
            Kind::V2 => {
                write(&g.memory, "memory.max", &hard)?;
                let _ = write(&g.memory, "memory.swap.max", "0");
            }
        }
        if let Some(n) = tasks {
            write(&g.pids, "pids.max", &(n + RESIDENT_TASKS).to_string())?;
        }
        Ok(g)
    }
}

impl Group {
    /// Readies the group (empty but for the caller) for the next run: new
    /// limits (the hard memory limit also covers what the caller has
    /// charged), counters back to zero.
    pub fn reset(&self, memory: u64, tasks: Option<u64>) -> io::Result<Baseline> {
        // Measured here, not right after the last run: the kernel memory
        // of that run (its /tmp, its namespaces) is still being freed then
        // (RCU), and a baseline read too early under-reports the next run.
        let resident = self.settled();
        // The caller's charge moves by a few pages from run to run: rounded
        // up to a MiB, the limit mostly stays what it was.
        let hard = memory.saturating_add(SLACK).saturating_add(resident.next_multiple_of(1 << 20)).to_string();
        let pids = tasks.map_or("max".to_string(), |n| (n + RESIDENT_TASKS).to_string());
        let oom_kills = self.oom_read.take().unwrap_or_else(|| self.read_oom_kills());
        let unchanged = self.applied.borrow().as_ref() == Some(&(hard.clone(), pids.clone()));
        if unchanged {
            self.reset_counters()?;
            return Ok(Baseline { oom_kills, resident });
        }
        self.applied.replace(None);
        match self.kind {
            Kind::V1 => {
                // memsw must stay >= the limit: raise it first, lower it last.
                let _ = write(&self.memory, "memory.memsw.limit_in_bytes", "-1");
                if write(&self.memory, "memory.limit_in_bytes", &hard).is_err() {
                    // Earlier runs' page cache is over the new limit and
                    // could not be reclaimed on the spot: drop it all (slow,
                    // ~100 ms, hence not after every run).
                    self.reclaim();
                    write(&self.memory, "memory.limit_in_bytes", &hard)?;
                }
                let _ = write(&self.memory, "memory.memsw.limit_in_bytes", &hard);
            }
            Kind::V2 => write(&self.memory, "memory.max", &hard)?,
        }
        self.reset_counters()?;
        write(&self.pids, "pids.max", &pids)?;
        self.applied.replace(Some((hard, pids)));
        Ok(Baseline { oom_kills, resident })
    }

    /// The charge (file cache aside) once what the last run left is freed.
    /// The kernel frees some of a run's memory late, after an RCU grace
    /// period: about 1 MiB of a jailed run's kernel memory, which the
    /// caller's baseline absorbs (see [`Group::reset`]), but tens of MiB of
    /// a fork bomb's thread stacks. Still charged at the reset, those would
    /// be counted in the next run's peak (a 250 KiB program read 26 MiB):
    /// a charge more than [`UNSETTLED`] above the least seen is waited for
    /// (at most [`SETTLE`]) until it is within [`SETTLED`] of it. One that
    /// stays is taken as the caller's own.
    fn settled(&self) -> u64 {
        let resident = || self.memory_now().saturating_sub(self.file_cache());
        let mut now = resident();
        let floor = self.floor.get().unwrap_or(now);
        if now > floor + UNSETTLED {
            let deadline = std::time::Instant::now() + SETTLE;
            while now > floor + SETTLED && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(1));
                now = resident();
            }
        }
        self.floor.set(Some(if now > floor + SETTLED { now } else { floor.min(now) }));
        now
    }

    /// The peak and the CPU time start again from here.
    fn reset_counters(&self) -> io::Result<()> {
        match self.kind {
            Kind::V1 => {
                if let Some(peak) = &self.peak {
                    rewrite(peak, "0").map_err(|e| annotate(e, &self.memory.join("memory.max_usage_in_bytes")))?;
                }
                rewrite(&self.cpu_file, "0").map_err(|e| annotate(e, &self.cpu.join("cpuacct.usage")))
            }
            Kind::V2 => {
                self.cpu_base.set(self.cpu_total());
                self.peak_reset.set(self.peak.as_ref().is_some_and(|f| rewrite(f, "0").is_ok()));
                Ok(())
            }
        }
    }

    /// Reclaims all the page cache charged to the (empty) group.
    pub fn reclaim(&self) {
        if self.kind == Kind::V1 {
            let _ = write(&self.memory, "memory.force_empty", "0");
        }
    }

    /// Moves the calling process (single-threaded: v1 moves the thread)
    /// into the group: one `write` per membership file, no allocation (init
    /// calls it, sharing the helper's memory). See the module doc for its cost.
    pub fn join(&self) -> io::Result<()> {
        for f in &self.procs {
            // SAFETY: a 1-byte static buffer, on a descriptor `f` keeps open across the call.
            if unsafe { libc::write(f.as_raw_fd(), b"0".as_ptr().cast(), 1) } != 1 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(())
    }

    /// CPU time (user + system) of every task that ran in the group since
    /// the last reset.
    pub fn cpu(&self) -> Duration {
        self.cpu_total().saturating_sub(self.cpu_base.get())
    }

    fn cpu_total(&self) -> Duration {
        let mut buf = [0u8; 1024];
        let text = reread(&self.cpu_file, &mut buf).unwrap_or("");
        match self.kind {
            Kind::V1 => Duration::from_nanos(text.trim().parse().unwrap_or(0)),
            Kind::V2 => Duration::from_micros(field(text, "usage_usec").unwrap_or(0)),
        }
    }

    /// Memory charged now, bytes.
    pub fn memory_now(&self) -> u64 {
        reread_u64(&self.files.usage).unwrap_or(0)
    }

    /// The kernel's peak since the last reset, bytes (page cache included;
    /// see the module doc). v2 gives `None` where the peak cannot be reset
    /// (kernel < 6.12): the caller then measures by itself.
    pub fn memory_peak(&self) -> Option<u64> {
        match self.kind {
            Kind::V1 => reread_u64(self.peak.as_ref()?),
            Kind::V2 if self.peak_reset.get() => reread_u64(self.peak.as_ref()?),
            Kind::V2 => None,
        }
    }

    /// Clean file-backed page cache charged to the group now (not tmpfs,
    /// not pages written and not yet on disk), bytes.
    pub fn file_cache(&self) -> u64 {
        let (file, unwritten) = self.file_pages();
        file.saturating_sub(unwritten)
    }

    /// File-backed page cache charged to the group now (not tmpfs), bytes,
    /// and how much of it is written and not yet on disk.
    pub fn file_pages(&self) -> (u64, u64) {
        // One read: the kernel makes the whole file for each (tens of µs on v1).
        let mut buf = [0u8; 8192];
        let stat = reread(&self.files.stat, &mut buf).unwrap_or("");
        let field = |name: &str| field(stat, name).unwrap_or(0);
        match self.kind {
            Kind::V1 => (field("cache").saturating_sub(field("shmem")), field("dirty") + field("writeback")),
            Kind::V2 => (field("file").saturating_sub(field("shmem")), field("file_dirty") + field("file_writeback")),
        }
    }

    /// How many tasks of the group the kernel's OOM killer has killed (to be
    /// called once a run is over: the count is the next run's baseline).
    pub fn oom_kills(&self) -> u64 {
        let n = self.read_oom_kills();
        self.oom_read.set(Some(n));
        n
    }

    fn read_oom_kills(&self) -> u64 {
        reread(&self.files.events, &mut [0u8; 512]).and_then(|t| field(t, "oom_kill")).unwrap_or(0)
    }

    /// The tasks the group holds now (`pids.current`: a task counts until
    /// it is reaped), read through a descriptor held open.
    pub fn tasks(&self) -> u64 {
        let mut buf = [0u8; 32];
        reread(&self.tasks, &mut buf).and_then(|t| t.trim().parse().ok()).unwrap_or(u64::MAX)
    }

    /// Whether any task but the caller is left in the group. (One
    /// controller's list tells: tasks are born in all of them at once, and
    /// only root could move one.)
    pub fn is_empty(&self) -> bool {
        let me = std::process::id().to_string();
        fs::read_to_string(self.pids.join("cgroup.procs"))
            .map(|s| s.split_whitespace().all(|p| p == me))
            .unwrap_or(true)
    }

    /// Kills every task of the group but the caller, until none is left
    /// (at most ~1 s).
    pub fn kill_all(&self) {
        for _ in 0..500 {
            let any = [&self.memory, &self.pids, &self.cpu].iter().map(|d| kill_procs(d)).sum::<usize>();
            if any == 0 {
                return;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Removes the group's directories (every task must be gone).
    pub fn remove(self) -> io::Result<()> {
        let mut dirs = vec![self.memory, self.pids, self.cpu];
        dirs.dedup();
        drop(self.procs);
        for d in dirs {
            // An exiting task may still be counted for a moment.
            let mut tries = 0;
            while let Err(e) = fs::remove_dir(&d) {
                if e.kind() == io::ErrorKind::NotFound {
                    break;
                }
                tries += 1;
                if tries > 200 {
                    return Err(annotate(e, &d));
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        Ok(())
    }
}

/// The pid in a group's name: `helper-<pid>`, or `helper-<pid>-…` for
/// another group of that process (`make bench` makes some).
pub fn helper_of(name: &str) -> Option<&str> {
    let pid = name.strip_prefix("helper-")?.split('-').next()?;
    (!pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit())).then_some(pid)
}

/// `SIGKILL`s every task listed in `dir/cgroup.procs` but the caller; how
/// many there were.
fn kill_procs(dir: &Path) -> usize {
    let me = std::process::id() as libc::pid_t;
    let list = fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
    let pids: Vec<libc::pid_t> = list.split_whitespace().filter_map(|p| p.parse().ok()).filter(|&p| p != me).collect();
    for &p in &pids {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(p), nix::sys::signal::Signal::SIGKILL);
    }
    pids.len()
}

fn ensure_dir(d: &Path) -> io::Result<()> {
    match fs::create_dir(d) {
        Err(e) if e.kind() != io::ErrorKind::AlreadyExists => Err(annotate(e, d)),
        _ => Ok(()),
    }
}

fn write(dir: &Path, file: &str, value: &str) -> io::Result<()> {
    let p = dir.join(file);
    OpenOptions::new().write(true).open(&p).and_then(|mut f| f.write_all(value.as_bytes())).map_err(|e| annotate(e, &p))
}

/// The value of `key` in "key value" lines.
fn field(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let mut f = l.split_whitespace();
        (f.next()? == key).then(|| f.next()?.parse().ok())?
    })
}

#[cfg(test)]
mod tests {
    use super::helper_of;

    #[test]
    fn a_groups_name_gives_its_owners_pid() {
        assert_eq!(helper_of("helper-4242"), Some("4242"));
        assert_eq!(helper_of("helper-4242-price-7"), Some("4242"));
        assert_eq!(helper_of("helper-"), None);
        assert_eq!(helper_of("helper-x1"), None);
        assert_eq!(helper_of("ojrunner"), None);
    }
}
