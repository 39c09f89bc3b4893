//! `judge-exec`: judges prepped claims, one per worker, each worker with its
//! own unprivileged identity ([`Slot`]).
//!
//! A claim starts only through [`Spool::start`], which refuses once the
//! drain latch is set. Each finished case is stored at once, so a judge
//! restarted after a crash reruns only the cases it had not finished; the
//! outcome is written in the same transaction that marks the claim judged.
//! A claim superseded while it runs (the hub handed its job again) stops at
//! its next case and leaves nothing behind.

use crate::compile_cache::CompileCache;
use crate::config::{self, Common};
use crate::control::{self, Event};
use crate::counter::Counter;
use crate::daemon::{Daemon, Failure};
use crate::judge::{Case, Compiled, Judge, Slot, Slots, Submitted, UnknownLanguage};
use crate::language::Languages;
use crate::outcome;
use crate::patience;
use crate::phase::{Phase, Timing};
use crate::sandbox::slot::SlotPool;
use crate::signals::Shutdown;
use crate::spool::{now_ms, ClaimRow, ClaimState, Spool, SpoolError};
use crate::testdata;
use log::{error, info, warn};
use ojrunner_daemon::stage::{self, Serve, Stage, State, Tick};
use ojrunner_daemon::ExitCode;
use serde_json::json;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, RwLock};

/// What the judge-exec stage is told (its command line is
/// `bins/judge-exec`'s, which also runs `judge-exec run` and `--probe`).
#[derive(Clone, Debug)]
pub struct Config {
    pub common: Common,
    /// How many claims are judged at once (default: the number of CPUs).
    pub workers: Option<usize>,
    /// The language table SIGHUP reloads (default: the built-in copy).
    pub languages: Option<PathBuf>,
    /// Bytes of compiled submissions kept in `<spool>/programs`
    /// (`compile_cache.rs`); 0: none.
    pub compile_cache_bytes: u64,
}

/// The compile cache's directory in the spool.
pub const PROGRAMS: &str = "programs";

/// What a worker reports back to the main loop.
enum Done {
    Claim(i64),
}

/// Runs the stage with `languages` (read from `cfg.languages` by the
/// caller, so a table it cannot read is refused before anything starts)
/// until `shutdown` stops it ([`stage::run`]: the first TERM finishes the
/// claims in flight and starts none, a second or QUIT stops at once).
pub fn run(cfg: &Config, languages: Languages, shutdown: Shutdown) -> Result<ExitCode, Failure> {
    // Shared with the workers; SIGHUP reloads it from --languages.
    let languages = Arc::new(RwLock::new(languages));
    let c: &Common = &cfg.common;
    let Daemon { spool, inbox } = Daemon::start("judge-exec", &c.spool, shutdown)?;
    crate::sandbox::place_cgroups().map_err(|e| Failure(ExitCode::Config, e.to_string()))?;
    let n =
        cfg.workers.unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)).clamp(1, 64);
    let judge =
        Judge { compile_cache: CompileCache::new(c.spool.join(PROGRAMS), cfg.compile_cache_bytes), ..Judge::default() };
    let (done_tx, done_rx) = mpsc::channel::<Done>();
    // One slot per worker; a lone claim borrows the idle workers' slots.
    let pool = Arc::new(SlotPool::new(0..n));
    let mut workers = Vec::new();
    for i in 0..n {
        let (tx, rx) = mpsc::channel::<ClaimRow>();
        let worker = Worker {
            i,
            spool_dir: c.spool.clone(),
            spool_id: spool.file_id(),
            judge: judge.clone(),
            languages: Arc::clone(&languages),
            pool: Arc::clone(&pool),
            done: done_tx.clone(),
            wake: inbox.tx.clone(),
        };
        std::thread::Builder::new()
            .name(format!("worker-{i}"))
            .spawn(move || worker.run(rx))
            .map_err(|e| Failure(ExitCode::Temporary, format!("worker thread: {e}")))?;
        workers.push(tx);
    }
    config::notify_ready(c.notify_fd);
    info!("{n} worker(s)");
    crate::language::log_toolchains(&languages.read().unwrap_or_else(|e| e.into_inner()));
    let mut judging = JudgeExec {
        spool,
        languages,
        languages_path: cfg.languages.clone(),
        workers,
        done: done_rx,
        busy: HashSet::new(),
        free: (0..n).rev().collect(),
        owner: vec![None; n],
        lost_counted: 0,
    };
    stage::run(&mut judging, inbox)
}

/// The stage's main loop's own state: its workers and what each judges.
struct JudgeExec {
    spool: Spool,
    /// Shared with the workers; SIGHUP reloads it from `languages_path`.
    languages: Arc<RwLock<Languages>>,
    languages_path: Option<PathBuf>,
    /// Each worker's queue.
    workers: Vec<mpsc::Sender<ClaimRow>>,
    done: mpsc::Receiver<Done>,
    /// The claims being judged.
    busy: HashSet<i64>,
    /// The workers without a claim.
    free: Vec<usize>,
    /// Each worker's claim.
    owner: Vec<Option<i64>>,
    /// Sandbox runs lost so far that the spool has counted.
    lost_counted: u64,
}

impl Stage for JudgeExec {
    fn tick(&mut self, serve: &mut Serve) -> Result<Tick, Failure> {
        // Nothing judged now could be recorded: stop (a run in flight ends
        // with the process); leased hands the jobs back.
        if let Some(why) = self.spool.gone() {
            return Err(crate::daemon::spool_gone(why));
        }
        let lost = crate::sandbox::helper::RUNS_LOST.load(std::sync::atomic::Ordering::Relaxed);
        if lost > self.lost_counted
            && self.spool.bump(Counter::SandboxRunsLost, "", (lost - self.lost_counted) as i64).is_ok()
        {
            self.lost_counted = lost;
        }
        while let Ok(Done::Claim(id)) = self.done.try_recv() {
            self.busy.remove(&id);
            if let Some(w) = self.owner.iter().position(|o| *o == Some(id)) {
                self.owner[w] = None;
                self.free.push(w);
            }
        }
        self.spool.drop_lost();
        // In flight first: a claim `started` but not being judged was
        // interrupted (a crash) and goes on. Then new ones, unless draining.
        let mut todo: Vec<ClaimRow> = self.spool.claims_in(&[ClaimState::Started]).unwrap_or_default();
        if serve.running() {
            todo.extend(self.spool.claims_in(&[ClaimState::Prepped]).unwrap_or_default());
        }
        for claim in todo {
            if self.busy.contains(&claim.id) {
                continue;
            }
            let Some(&w) = self.free.last() else { break };
            if claim.state == ClaimState::Prepped {
                match self.spool.start(claim.id) {
                    Ok(true) => {}
                    Ok(false) => continue, // drained, or moved
                    Err(e) => {
                        error!("{e}");
                        continue;
                    }
                }
            } else {
                info!("job {} claim {}: resuming (was in flight)", claim.job_id, claim.id);
            }
            self.free.pop();
            self.busy.insert(claim.id);
            self.owner[w] = Some(claim.id);
            let _ = self.workers[w].send(claim);
        }
        Ok(if self.busy.is_empty() { Tick::Idle(patience::spool_poll()) } else { Tick::Busy(patience::spool_poll()) })
    }

    fn event(&mut self, event: Event, _: State) {
        if let Event::Signal(libc::SIGHUP) = event {
            reload(self.languages_path.as_deref(), &self.languages);
        }
    }

    fn status(&self, state: State) -> serde_json::Value {
        json!({"stage": "judge-exec", "workers": self.workers.len(), "judging": self.busy.iter().collect::<Vec<_>>(),
               "draining": state != State::Running || self.spool.draining().unwrap_or(false)})
    }

    fn drain(&mut self, why: &str) {
        info!("{why}: finishing the {} claim(s) in flight, starting none", self.busy.len());
    }

    fn stop(&mut self, why: &str) -> ExitCode {
        info!("{why}: stopped at once; {} claim(s) in flight resume on the next start", self.busy.len());
        ExitCode::Ok
    }

    fn finished(&mut self) -> ExitCode {
        info!("nothing in flight: stopped");
        ExitCode::Ok
    }
}

/// One worker thread: judges the claims the main loop sends it, one at a
/// time, on a slot of the pool, and tells the loop when each is done.
struct Worker {
    i: usize,
    spool_dir: PathBuf,
    /// The spool's file: a worker never opens another.
    spool_id: crate::spool::FileId,
    judge: Judge,
    /// The table as SIGHUP last loaded it.
    languages: Arc<RwLock<Languages>>,
    pool: Arc<SlotPool>,
    done: mpsc::Sender<Done>,
    /// Wakes the main loop.
    wake: mpsc::Sender<Event>,
}

impl Worker {
    fn run(self, rx: mpsc::Receiver<ClaimRow>) {
        let mut spool = match Spool::open_as(&self.spool_dir, self.spool_id) {
            Ok(s) => s,
            Err(e) => return error!("worker {}: {e}", self.i),
        };
        for claim in rx {
            let id = claim.id;
            let tag = format!("job {} claim {}", claim.job_id, claim.id);
            // A claim is judged with the table as it was when it began.
            let table = self.languages.read().map(|l| l.clone()).unwrap_or_else(|e| e.into_inner().clone());
            let index = self.pool.take();
            let judged = judge_claim(&mut spool, &self.judge, &table, &claim, &Slot::for_index(index), &self.pool);
            self.pool.give(index);
            match judged {
                Ok(true) => {
                    info!("{tag}: judged");
                    control::poke(&self.spool_dir, "reportd");
                }
                Ok(false) => info!("{tag}: superseded while judging; its work is dropped"),
                Err(e) => error!("{tag}: {e}"),
            }
            let _ = self.done.send(Done::Claim(id));
            let _ = self.wake.send(Event::Wake);
        }
    }
}

/// Judges one started claim to its outcome. False if the claim moved under
/// us (superseded, lease lost).
fn judge_claim(
    spool: &mut Spool,
    judge: &Judge,
    languages: &Languages,
    claim: &ClaimRow,
    slot: &Slot,
    pool: &SlotPool,
) -> Result<bool, ClaimError> {
    let job = claim.job.as_ref().map_err(|e| ClaimError::BadJob(e.to_string()))?;
    let dir = spool.claim_dir(claim.id);
    let Some(td) = claim.testdata.clone() else {
        return Err(ClaimError::NoTestdata);
    };
    let mut done = spool.case_results(claim.id)?;
    // The checker first: a special judge or interactor that does not build
    // makes every case JE, and the submission need not be compiled.
    let checker = judge.prepare_checker(job.checker.as_deref(), &td, &spool.dir().join("checkers"), slot);
    let src = dir.join("src");
    let submitted = Submitted {
        lang: languages.by_id(job.language).ok_or(UnknownLanguage(job.language)),
        src: &src,
        tasks: &job.tasks,
        checker,
    };
    // The cases not finished before (by an earlier try of this claim).
    let todo: Vec<Case> = outcome::cases_left(&job.tasks, &done)
        .into_iter()
        .map(|(t, c)| Case {
            task: t,
            case: c,
            input: testdata::case_file(&td, t, c, "in"),
            answer: testdata::case_file(&td, t, c, "out"),
        })
        .collect();
    let (mut moved, mut failed) = (false, None);
    let slots = Slots { own: *slot, pool: Some(pool), scratch: &dir.join("cases") };
    // The compile phase ends when the first case begins (or, with nothing
    // to run, when the first result comes); it is recorded with that case.
    let began = std::time::Instant::now();
    let mut compile_timed = false;
    let compiled = judge.judge_all(&submitted, &todo, &slots, |c, run| {
        let r = run.result;
        let event = json!({"t": now_ms() - claim.claimed_at, "kind": "case", "task": c.task, "case": c.case,
                           "status": r.status, "execTime": r.exec_time, "memoryUsage": r.memory_usage})
        .to_string();
        let mut timings = Vec::with_capacity(2);
        if !std::mem::replace(&mut compile_timed, true) {
            let ended = run.timing.map_or_else(std::time::Instant::now, |t| t.began);
            timings.push(Timing::new(Phase::Compile, ended.saturating_duration_since(began).as_micros() as i64));
        }
        if let Some(t) = run.timing {
            timings.push(Timing::case(c.task, c.case, t.took));
        }
        match spool.record_case(claim.id, c.task, c.case, &r, &event, &timings) {
            Ok(true) => {
                control::poke(spool.dir(), "reportd");
                done.insert((c.task, c.case), r);
                true
            }
            Ok(false) => {
                moved = true;
                false
            }
            Err(e) => {
                failed = Some(e);
                false
            }
        }
    });
    if let Some(e) = failed {
        return Err(e.into());
    }
    if moved {
        return Ok(false);
    }
    if matches!(compiled, Compiled::JudgeError(_)) {
        warn!("job {} claim {}: judged JE: the judge could not compile", claim.job_id, claim.id);
    }
    Ok(spool.mark_judged(claim.id, &outcome::assemble(&job.tasks, done))?)
}

/// Why a started claim could not be judged (it stays started: the next
/// judge-exec tries again).
#[derive(Debug, thiserror::Error)]
enum ClaimError {
    #[error("{0}")]
    BadJob(String),
    #[error("started without testdata (corrupt row?)")]
    NoTestdata,
    #[error("{0}")]
    Spool(#[from] SpoolError),
}

/// SIGHUP: reads the language table again. A table that does not load is
/// logged and the old one kept.
fn reload(path: Option<&Path>, languages: &RwLock<Languages>) {
    let Some(path) = path else {
        return info!("SIGHUP: the built-in language table has nothing to reload");
    };
    match Languages::load(path) {
        Ok(l) => {
            *languages.write().unwrap_or_else(|e| e.into_inner()) = l;
            info!("SIGHUP: language table {} reloaded", path.display());
        }
        Err(e) => warn!("SIGHUP: language table {}: {e}; keeping the old one", path.display()),
    }
}
