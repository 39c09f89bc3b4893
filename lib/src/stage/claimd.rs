//! `claimd`: registers the runner, claims jobs while it holds fewer than the
//! hub allows, and prepares each claim (code, testdata) for `judge-exec`.
//!
//! A claim is recorded in the spool the moment the hub hands it out, before
//! any download, so the heartbeat keeps its lease and a crash here loses
//! nothing: a restarted `claimd` prepares again whatever is still `claimed`.
//! Once a drain begins (the spool's latch, or TERM) it claims nothing more,
//! and every claim not started goes back as `abort(drain)`, never as
//! `prep_failed`: a drain must not spend a job's attempts. A long poll in
//! flight is asked to end (`DELETE .../next-job`) and still read to its
//! end, so an idle runner stops at once and a job in the answer is kept.
//!
//! Each claim is prepared on a thread of its own, so a claim whose problem
//! the hub cannot serve now never holds up a claim of another while there
//! is room. Only the job's own faults cost it an attempt: a payload, code
//! or testdata that cannot be judged ends the claim as `abort(prep_failed)`
//! (a hostile archive at once); a hub away, a download cut midway, or the
//! runner's own full disk are waited out. A testdata channel that refuses
//! the runner's `SANDBOX_TOKEN` (401, 403) is the runner's configuration:
//! claimd claims nothing more, hands back every claim not started as
//! `abort(drain)`, and exits 100; `runnerd` then finishes what is in flight.
//!
//! Before it asks the hub for a job, claimd makes sure the claim can be
//! recorded: the spool keeps space set aside for it ([`Spool::reserve`]),
//! freed to record a claim the full disk would refuse. While the reserve
//! cannot be made again, claiming pauses, and `status` says why.

use crate::answer::{Answer, HubCall};
use crate::claim::{self, Fault, Next};
use crate::config::{self, Common};
use crate::control::{self, Event};
use crate::daemon::{self, Daemon, Failure};
use crate::hub::{self, HubClient};
use crate::language::Languages;
use crate::metrics;
use crate::patience;
use crate::protocol::{AbortReason, Job};
use crate::signals::{self, Shutdown};
use crate::spool::{ClaimRow, ClaimState, FileId, Retry, RunnerIdentity, Spool, SpoolError};
use crate::testdata::Cache;
use log::{error, info, warn};
use ojrunner_daemon::stage::{self, Serve, Stage, State, Tick, Watch};
use ojrunner_daemon::ExitCode;
use serde_json::json;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// What claimd is told (its command line is `bins/claimd`'s).
#[derive(Clone, Debug)]
pub struct Config {
    pub common: Common,
    /// Long-poll the hub this many seconds per claim request
    /// (`OJ_CLAIM_WAIT`, as given: checked by [`run`]).
    pub claim_wait: String,
    /// The language table (default: the built-in copy).
    pub languages: Option<PathBuf>,
}

/// Where claimd is between the hub and its spool (the stop policy's
/// state is the loop's: [`stage::State`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Doing {
    /// Has never held an identity: registering (a restart registers,
    /// a running claimd never registers a second identity).
    Registering { woken: bool },
    /// Registered, between claim requests.
    Between { woken: bool },
    /// A claim request in flight: SIGQUIT waits for its answer.
    /// `latch_moved`: a wake-up came during it (look at the drain latch).
    Claiming { woken: bool, latch_moved: bool },
}

struct Claimd {
    spool: Spool,
    hub: HubClient,
    cache: Cache,
    languages: Languages,
    languages_path: Option<PathBuf>,
    registration_token: String,
    name: String,
    claim_wait: u64,
    /// Where readiness is told, until it is (once registered).
    notify_fd: Option<i32>,
    last_contact: Option<i64>,
    /// Its state; `woken` in each: a wake-up served during a request or a
    /// pause, not acted on yet.
    doing: Doing,
    /// The drain was said in the log.
    said_draining: bool,
    /// The preps in progress, one thread each, by claim id.
    preps: HashMap<i64, JoinHandle<()>>,
    /// Set by a prep when the testdata channel refused `SANDBOX_TOKEN`.
    refused: Arc<Mutex<Option<String>>>,
    /// Why claiming is paused (the spool's disk is full), while it is.
    paused: Option<String>,
}

/// Runs claimd until `shutdown` stops it ([`stage::run`]: the first TERM
/// hands back what has not started and stops; QUIT stops at once, once a
/// claim request in flight is answered); an error says why it could not
/// go on (and its exit code).
pub fn run(cfg: Config, shutdown: Shutdown) -> Result<(), Failure> {
    let c = &cfg.common;
    let hub = c.hub_client(&c.sandbox_token()?)?;
    let registration_token = c.registration_token()?;
    let languages = daemon::languages(cfg.languages.as_deref())?;
    let Daemon { spool, inbox } = Daemon::start("claimd", &c.spool, shutdown)?;
    let mut d = Claimd {
        cache: Cache::new(&c.spool),
        spool,
        hub,
        languages,
        languages_path: cfg.languages.clone(),
        registration_token,
        name: c.runner_name(),
        claim_wait: patience::claim_wait(config::seconds("OJ_CLAIM_WAIT (--claim-wait)", &cfg.claim_wait)?),
        notify_fd: c.notify_fd,
        last_contact: None,
        doing: Doing::Registering { woken: false },
        said_draining: false,
        preps: HashMap::new(),
        refused: Arc::new(Mutex::new(None)),
        paused: None,
    };
    stage::run(&mut d, inbox).map(|_| ())
}

impl Stage for Claimd {
    fn tick(&mut self, serve: &mut Serve) -> Result<Tick, Failure> {
        // A spool deleted or replaced under the runner: claim nothing
        // more (a claim could not be recorded); leased hands back what
        // the runner holds.
        if let Some(why) = self.spool.gone() {
            return Err(daemon::spool_gone(why));
        }
        if matches!(self.doing, Doing::Registering { .. }) {
            // Stopped while registering: nothing was claimed.
            let Some(_) = self.identity(serve)? else { return Ok(Tick::Idle(Duration::ZERO)) };
            config::notify_ready(self.notify_fd.take());
        }
        // Served while this claimd waited: what follows looks again anyway.
        self.take_woken();
        // How long this round's claim request took: a long poll is its own wait.
        let mut asked_for = Duration::ZERO;
        self.preps.retain(|_, prep| !prep.is_finished());
        let refused = self.refused.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if let Some(why) = refused {
            return Err(self.stop_claiming(&why));
        }
        let draining = !serve.running() || self.spool.draining().unwrap_or(false);
        if draining {
            if !std::mem::replace(&mut self.said_draining, true) {
                info!("draining: claiming nothing more; claims not started go back as abort(drain)");
            }
            self.abort_unstarted();
            if !serve.running() {
                return Ok(Tick::Idle(Duration::ZERO));
            }
        } else {
            // A claim left `claimed` by a crash is prepared again.
            for c in self.claims(&[ClaimState::Claimed]) {
                self.start_prep(serve, c);
            }
            let asked = std::time::Instant::now();
            let claimed = self.claim_once(serve)?;
            asked_for = asked.elapsed();
            // Stopping at once: the claim just recorded stays `claimed`.
            if serve.stopping() {
                return Ok(Tick::Busy(Duration::ZERO));
            }
            if let Some(claimed) = claimed {
                self.start_prep(serve, claimed);
                return Ok(Tick::Busy(Duration::ZERO));
            }
        }
        // A wake-up served during a request: look again now. A long poll
        // that just ended was this round's wait.
        if self.take_woken() {
            return Ok(Tick::Busy(Duration::ZERO));
        }
        Ok(Tick::Busy(if draining { patience::spool_poll() } else { self.poll_interval().saturating_sub(asked_for) }))
    }

    fn event(&mut self, event: Event, _: State) {
        match event {
            Event::Wake => match &mut self.doing {
                Doing::Registering { woken } | Doing::Between { woken } => *woken = true,
                Doing::Claiming { woken, latch_moved } => {
                    *woken = true;
                    *latch_moved = true;
                }
            },
            Event::Signal(libc::SIGHUP) => match &self.languages_path {
                Some(p) => match Languages::load(p) {
                    Ok(l) => {
                        self.languages = l;
                        info!("SIGHUP: language table {} reloaded", p.display());
                    }
                    Err(e) => warn!("SIGHUP: language table {}: {e}; keeping the old one", p.display()),
                },
                None => info!("SIGHUP: the built-in language table has nothing to reload"),
            },
            Event::Signal(sig) => info!("{}", signals::name(sig)),
            // Answered by the loop (`stage.rs`) before they come here.
            Event::Command { .. } => {}
        }
    }

    fn status(&self, state: State) -> serde_json::Value {
        json!({
            "stage": "claimd",
            "runner_id": self.spool.identity().ok().flatten().map(|i| i.runner_id),
            "held": self.spool.held_count().ok(),
            "draining": state != State::Running || self.spool.draining().unwrap_or(false),
            "last_contact_ms": self.last_contact,
            "preparing": self.preps.len(),
            "paused": self.paused,
        })
    }

    // drain, stop and finished: the loop's own, logged. A stop at once
    // may leave the hub handing a job to the request in flight whether or
    // not anyone still reads the answer: it was read and recorded first
    // ([`Claimd::serving`]), and the next claimd prepares it.
}

impl Claimd {
    /// The identity in the spool, registering first if there is none. None
    /// if told to stop while registering.
    fn identity(&mut self, serve: &mut Serve) -> Result<Option<RunnerIdentity>, Failure> {
        let registered = !matches!(self.doing, Doing::Registering { .. });
        if let Some(id) = self.spool.identity()? {
            match crate::protocol::check_token(&id.token) {
                Ok(()) => {
                    self.registered();
                    return Ok(Some(id));
                }
                // Recorded by a build that did not check registrations: no
                // call could ever carry it, so nothing was claimed with it.
                Err(e) if !registered => {
                    warn!("the spool's identity {} is unusable ({e}): forgotten, registering again", id.runner_id);
                    self.spool.forget_identity(&id.runner_id)?;
                }
                Err(e) => return Err(Failure(ExitCode::Failure, format!("the runner's identity is unusable ({e})"))),
            }
        }
        // Forgotten while this claimd ran: leased was refused (two 401s)
        // and the runner stops; registering again here would leave a new
        // identity behind it. A restart registers.
        if registered {
            return Err(Failure(
                ExitCode::Failure,
                "the runner's identity was forgotten (the hub refused it); a restart registers again".into(),
            ));
        }
        let mut tries = 0;
        loop {
            if !serve.running() {
                return Ok(None);
            }
            tries += 1;
            let answer = self.hub.register(&self.registration_token, &self.name);
            metrics::count_hub_answer(&mut self.spool, HubCall::Register, &answer);
            let why = match &answer {
                Answer::Done { body, .. } => match hub::parse_registration(body) {
                    Ok(reg) => {
                        let gone = self.spool.set_identity(&reg)?;
                        info!(
                            "registered as {} ({} s heartbeat, {} jobs at most){}",
                            reg.runner_id,
                            reg.config.heartbeat_interval_sec,
                            reg.config.max_concurrent_jobs,
                            if gone.is_empty() {
                                String::new()
                            } else {
                                format!("; {} claims of the old identity dropped", gone.len())
                            }
                        );
                        control::poke(self.spool.dir(), "leased");
                        self.registered();
                        return self.spool.identity().map_err(Failure::from);
                    }
                    Err(hub::BadRegistration::Unusable(why)) => {
                        // PROTOCOL.md's rule for a refused registration: final.
                        return Err(Failure(
                            ExitCode::Failure,
                            format!("the hub's registration cannot be used ({why}): taken as refused"),
                        ));
                    }
                    Err(e) => format!("unreadable registration ({e})"),
                },
                Answer::Unauthorized(_) => {
                    return Err(Failure(ExitCode::Failure, "the hub refused the registration token (401)".into()));
                }
                Answer::Garbled { .. }
                | Answer::NoWord(_)
                | Answer::NoWork
                | Answer::NotHeld(_)
                | Answer::Refused(_)
                | Answer::NotServed(_) => answer.describe(),
            };
            let delay = patience::REGISTER.delay(tries).unwrap_or(Duration::from_secs(30));
            warn!("register: {why}; trying again in {delay:?}");
            if self.pause(serve, delay) {
                return Ok(None);
            }
        }
    }

    /// It holds an identity from now on (and never registers another).
    fn registered(&mut self) {
        if let Doing::Registering { woken } = self.doing {
            self.doing = Doing::Between { woken };
        }
    }

    /// Whether a wake-up was served and not acted on yet; it is now.
    fn take_woken(&mut self) -> bool {
        match &mut self.doing {
            Doing::Registering { woken } | Doing::Between { woken } | Doing::Claiming { woken, .. } => {
                std::mem::take(woken)
            }
        }
    }

    /// The testdata channel refused `SANDBOX_TOKEN`: no job is at fault,
    /// and none can be prepared until the configuration is fixed. Hands
    /// back every claim not started as `abort(drain)` and exits 100.
    fn stop_claiming(&mut self, why: &str) -> Failure {
        error!("the testdata channel refused SANDBOX_TOKEN ({why}); claiming nothing more");
        self.abort_unstarted();
        Failure(
            ExitCode::Config,
            format!("the testdata channel refused SANDBOX_TOKEN ({why}): fix SANDBOX_TOKEN or SANDBOX_TOKEN_FILE"),
        )
    }

    /// Runs `ask` (a claim request) with [`daemon::serving`], serving the
    /// inbox meanwhile: a status asked is answered, not left to time out.
    /// Nothing cuts the request short, not even a stop at once: the hub may
    /// hand it a job whether or not anyone still reads the answer, so it
    /// is read and recorded first (the caller decides what it means). A
    /// long poll of `cancellable` is asked to end, once, when a drain or a
    /// stop begins.
    fn serving<T: Send + 'static>(
        &mut self,
        serve: &mut Serve,
        mut cancellable: Option<RunnerIdentity>,
        ask: impl FnOnce() -> T + Send + 'static,
    ) -> T {
        let mut said = false;
        let served = daemon::serving(ask, || {
            if !serve.serve(self, Duration::ZERO) && !std::mem::replace(&mut said, true) {
                info!("stopping once the hub answers the claim request in flight");
            }
            // A spool gone is a stop too: a job handed out now could not be recorded.
            let end = |me: &mut Self| !serve.running() || me.latch_moved() || me.spool.gone().is_some();
            if let Some(poll) = cancellable.take_if(|_| end(self)) {
                self.cancel_poll(poll);
            }
            true
        });
        served.expect("claimd never abandons a request")
    }

    /// Waits `d`, serving the inbox, or less if a drain, a stop or a
    /// wake-up (the drain latch moved) arrives: the caller looks again.
    /// True if a drain or a stop did (or had).
    fn pause(&mut self, serve: &mut Serve, d: Duration) -> bool {
        let end = ojrunner_daemon::clock::deadline(d);
        while serve.running() && !self.take_woken() {
            let left = end.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                break;
            }
            serve.serve(self, left);
        }
        !serve.running()
    }

    /// Whether a wake-up during the claim request in flight finds the
    /// drain latch set (taken: asked once).
    fn latch_moved(&mut self) -> bool {
        let moved = match &mut self.doing {
            Doing::Claiming { latch_moved, .. } => std::mem::take(latch_moved),
            Doing::Registering { .. } | Doing::Between { .. } => false,
        };
        moved && self.spool.draining().unwrap_or(false)
    }

    /// Asks the hub to end the poll in flight (once), so that an idle drain
    /// does not wait the poll out. The poll's answer is still read to its
    /// end: a job already in it is recorded and handed back as
    /// `abort(drain)`. Sent from a thread of its own: the hub may be slow.
    fn cancel_poll(&self, id: RunnerIdentity) {
        let (hub, dir, spool_id) = (self.hub.clone(), self.spool.dir().to_path_buf(), self.spool.file_id());
        let sent = std::thread::Builder::new().name("cancel-poll".into()).spawn(move || {
            let answer = hub.cancel_next_job(&id.runner_id, &id.token);
            match &answer {
                Answer::Done { .. } => info!("draining: the hub ends the waiting poll"),
                Answer::NotServed(_) => info!("draining: the hub cannot end a poll; waiting it out"),
                a @ (Answer::NoWord(_)
                | Answer::Garbled { .. }
                | Answer::Unauthorized(_)
                | Answer::NoWork
                | Answer::NotHeld(_)
                | Answer::Refused(_)) => {
                    warn!("draining: asking the hub to end the poll: {}; waiting it out", a.describe())
                }
            }
            // Counted on a connection of its own, as a prep counts.
            if let Ok(mut spool) = Spool::open_as(&dir, spool_id) {
                metrics::count_hub_answer(&mut spool, HubCall::CancelPoll, &answer);
            }
        });
        if let Err(e) = sent {
            warn!("draining: cannot start a thread to end the poll ({e}); waiting it out");
        }
    }

    fn poll_interval(&self) -> Duration {
        let secs = self.spool.identity().ok().flatten().map(|i| i.config.poll_interval_sec).unwrap_or(3);
        Duration::from_secs(secs.clamp(1, 60).unsigned_abs())
    }

    fn claims(&self, states: &[ClaimState]) -> Vec<ClaimRow> {
        self.spool.claims_in(states).unwrap_or_else(|e| {
            error!("{e}");
            Vec::new()
        })
    }

    fn abort_unstarted(&mut self) {
        match self.spool.abort_unstarted() {
            Ok(ids) if !ids.is_empty() => {
                info!("handed back {} claim(s) not started as abort(drain): {ids:?}", ids.len());
                control::poke(self.spool.dir(), "reportd");
            }
            Ok(_) => {}
            Err(e) => error!("{e}"),
        }
    }

    /// Whether a claim the hub hands out now can be recorded: the spool's
    /// reserve is in place, made again if a claim used it. While it cannot
    /// be (the disk is full), claiming pauses and `status` says why.
    fn room_to_record(&mut self) -> bool {
        match self.spool.reserve() {
            Ok(()) => {
                if let Some(why) = self.paused.take() {
                    info!("claiming resumed (it was paused: {why})");
                }
                true
            }
            Err(e) => {
                if self.paused.is_none() {
                    warn!("claiming paused: {e}");
                }
                self.paused = Some(e.to_string());
                false
            }
        }
    }

    /// Asks the hub for one job if there is room; the new claim, if any.
    fn claim_once(&mut self, serve: &mut Serve) -> Result<Option<ClaimRow>, Failure> {
        let Some(id) = self.identity(serve)? else { return Ok(None) };
        let held = self.spool.held_count()?;
        if held >= id.config.max_concurrent_jobs.max(1) || !self.room_to_record() {
            return Ok(None);
        }
        // A request already sent is read to the end, even if a stop arrives:
        // an assignment in flight is recorded (and, draining, handed back).
        let (hub, wait) = (self.hub.clone(), self.claim_wait);
        let (rn, token) = (id.runner_id.clone(), id.token.clone());
        if let Doing::Between { woken } = self.doing {
            self.doing = Doing::Claiming { woken, latch_moved: false };
        }
        let answer = self.serving(serve, (wait > 0).then(|| id.clone()), move || hub.next_job(&rn, &token, wait));
        if let Doing::Claiming { woken, .. } = self.doing {
            self.doing = Doing::Between { woken };
        }
        metrics::count_hub_answer(&mut self.spool, HubCall::NextJob, &answer);
        match answer {
            Answer::Done { body, .. } => {
                self.last_contact = Some(crate::spool::now_ms());
                self.record_claim(&id, &body)
            }
            Answer::NoWork => {
                self.last_contact = Some(crate::spool::now_ms());
                Ok(None)
            }
            Answer::Unauthorized(_) => {
                // The heartbeat owns fail-fast; here we only idle and ask again.
                warn!("next-job: 401 (the heartbeat decides whether the identity is gone)");
                Ok(None)
            }
            Answer::Garbled { body, why, .. } => {
                self.last_contact = Some(crate::spool::now_ms());
                self.hand_back_unreadable(&id, &body, &why)
            }
            a @ (Answer::NoWord(_) | Answer::NotHeld(_) | Answer::Refused(_) | Answer::NotServed(_)) => {
                // Never retried through a lost connection: we simply ask again later.
                warn!("next-job: {}", a.describe());
                Ok(None)
            }
        }
    }

    /// A next-job 200 whose body no parser reads (not JSON, not UTF-8,
    /// nested too deep, over the body limit, no `job_id` string where the
    /// parser looks): the hub may still have handed out a job. If the body names one ([`Job::scan_id`], a bounded and
    /// lenient scan), it is recorded and handed back at once as
    /// `abort(prep_failed)` with the reason, never left to its lease.
    fn hand_back_unreadable(
        &mut self,
        id: &RunnerIdentity,
        body: &str,
        why: &str,
    ) -> Result<Option<ClaimRow>, Failure> {
        let shown = body.chars().take(200).collect::<String>();
        let Some(job_id) = Job::scan_id(body.as_bytes()) else {
            error!(
                "next-job: HTTP 200 whose body is unreadable ({why}) and names no job id; no job recorded \
                 (if the hub handed one out, its lease expires): {shown}"
            );
            return Ok(None);
        };
        // The payload is kept as evidence, as far as the scan looked.
        let mut end = body.len().min(crate::protocol::SCAN_BYTES);
        while !body.is_char_boundary(end) {
            end -= 1;
        }
        let claim = self.record(id, &job_id, &body[..end])?;
        let note = format!("the hub's job payload is unreadable ({why})");
        error!("job {job_id}: {note}; handing it back as abort(prep_failed): {shown}");
        if let Some(c) = claim {
            if self.spool.abort(c.id, AbortReason::PrepFailed, &note)? {
                control::poke(self.spool.dir(), "reportd");
            }
        }
        Ok(None)
    }

    /// Records the job the hub just handed out, using the spool's reserve
    /// if the disk filled since it was made.
    fn record_claim(&mut self, id: &RunnerIdentity, body: &str) -> Result<Option<ClaimRow>, Failure> {
        let Some(job_id) = Job::id_of(body) else {
            let why = match Job::parse(body) {
                Err(e) => e.to_string(),
                Ok(_) => "no job_id".into(),
            };
            return self.hand_back_unreadable(id, body, &why);
        };
        // An id no URL can carry cannot be handed back either (its abort
        // would go elsewhere): it is not recorded. One that can be carried
        // but is refused (too long) is recorded, and its prep fails.
        if let Some(e) = crate::protocol::check_id("job_id", &job_id).err().filter(|e| !e.carriable) {
            error!("next-job: the hub handed out a job this runner cannot take ({e}); cannot hand it back (its lease will expire)");
            return Ok(None);
        }
        self.record(id, &job_id, body)
    }

    /// Records a claim of `job_id` with `body` as its payload.
    fn record(&mut self, id: &RunnerIdentity, job_id: &str, body: &str) -> Result<Option<ClaimRow>, Failure> {
        let recorded = match self.spool.insert_claim(&id.runner_id, job_id, body) {
            // Room or a lock may come: a full disk's room is the reserve.
            Err(e) if e.retry() == Retry::Later && self.spool.release_reserve() => {
                warn!("job {job_id}: recording the claim: {e}; recording it in the spool's reserve");
                self.spool.insert_claim(&id.runner_id, job_id, body)
            }
            r => r,
        };
        let gone = match &recorded {
            Err(SpoolError::Gone(why)) => Some(why.clone()),
            Err(_) => self.spool.gone(),
            Ok(_) => None,
        };
        if let Some(why) = gone {
            // Nowhere to record it: handed back from memory, at once.
            let answer =
                self.hub.abort(&id.runner_id, &id.token, job_id, &crate::outcome::abort_body(AbortReason::Drain));
            match crate::outcome::classify(HubCall::Abort, &answer) {
                crate::outcome::Meaning::Settled => warn!("job {job_id}: {why}; handed back as abort(drain)"),
                crate::outcome::Meaning::Rejected | crate::outcome::Meaning::Final | crate::outcome::Meaning::Retry => {
                    error!("job {job_id}: {why}; handing it back: {}; its lease expires", answer.describe())
                }
            }
            return Err(daemon::spool_gone(why));
        }
        let (claim_id, old) = recorded.map_err(|e| Failure(ExitCode::Temporary, format!("job {job_id}: {e}")))?;
        if !old.is_empty() {
            info!("job {job_id}: claimed again as claim {claim_id}; earlier claim(s) {old:?} superseded");
            for o in old {
                let _ = std::fs::remove_dir_all(self.spool.claim_dir(o));
            }
        } else {
            info!("job {job_id}: claimed as claim {claim_id}");
        }
        control::poke(self.spool.dir(), "leased");
        self.spool.claim(claim_id).map_err(Failure::from)
    }

    /// Prepares `claim` on a thread of its own, unless one already does.
    fn start_prep(&mut self, serve: &Serve, claim: ClaimRow) {
        if self.preps.contains_key(&claim.id) {
            return;
        }
        let prepper = Prepper {
            dir: self.spool.dir().to_path_buf(),
            spool_id: self.spool.file_id(),
            hub: self.hub.clone(),
            cache: self.cache.clone(),
            languages: self.languages.clone(),
            watch: serve.watch(),
            refused: self.refused.clone(),
            wake: serve.waker(),
        };
        let (id, job_id) = (claim.id, claim.job_id.clone());
        match std::thread::Builder::new().name(format!("prep-{id}")).spawn(move || prepper.prep(&claim)) {
            Ok(thread) => {
                self.preps.insert(id, thread);
            }
            Err(e) => error!("job {job_id} claim {id}: cannot start its prep ({e}); trying again on the next pass"),
        }
    }
}

/// What one prep thread needs: its own spool connection and copies of the
/// rest.
struct Prepper {
    dir: PathBuf,
    /// The spool's file: a prep never opens another.
    spool_id: FileId,
    hub: HubClient,
    cache: Cache,
    languages: Languages,
    /// The run's state: once a drain began, the claim goes back (a stop
    /// at once without a drain, QUIT, leaves it `claimed` for the next
    /// claimd).
    watch: Watch,
    /// Where a prep says that the testdata channel refused the token.
    refused: Arc<Mutex<Option<String>>>,
    /// Wakes claimd's main loop.
    wake: std::sync::mpsc::Sender<Event>,
}

impl Prepper {
    /// Prepares one claim, trying again as [`claim::Tries`] says. A stop
    /// at any point hands the claim back as `abort(drain)` instead.
    fn prep(&self, claim: &ClaimRow) {
        let tag = format!("job {} claim {}", claim.job_id, claim.id);
        let mut spool = match Spool::open_as(&self.dir, self.spool_id) {
            Ok(s) => s,
            Err(e) => return error!("{tag}: prep: {e}; tried again on claimd's next pass"),
        };
        let mut tries = claim::Tries::default();
        let since = std::time::Instant::now();
        loop {
            if self.watch.drain_begun() || spool.draining().unwrap_or(false) {
                return self.abort(&mut spool, claim, AbortReason::Drain, "drain: stopped during prep");
            }
            // Dropped (lease lost) or superseded while the hub was away: not ours any more.
            match spool.claim(claim.id) {
                Ok(Some(c)) if c.state != ClaimState::Claimed => {
                    return info!("{tag}: moved during prep (dropped or superseded); left as it is")
                }
                Ok(None) => return info!("{tag}: gone during prep"),
                // A spool that cannot be read now: mark_prepped decides later.
                _ => {}
            }
            let fault = match claim::prepare(&mut spool, &self.hub, &self.cache, &self.languages, claim) {
                Ok(prepared) => {
                    match spool.mark_prepped(claim.id, &prepared.testdata, &prepared.timings) {
                        Ok(true) => {
                            info!("{tag}: prepped");
                            control::poke(spool.dir(), "judge-exec");
                        }
                        Ok(false) => info!("{tag}: moved during prep (drained or superseded); left as it is"),
                        Err(e) => error!("{tag}: {e}"),
                    }
                    return;
                }
                Err(fault) => fault,
            };
            let (Fault::Again(why) | Fault::Wait(why) | Fault::Bad(why) | Fault::Refused(why)) = &fault;
            // A stop that landed during the last try still makes this a
            // drain, not a failure.
            let stopping = || self.watch.drain_begun() || spool.draining().unwrap_or(false);
            match tries.failed(&fault, since.elapsed(), stopping) {
                Next::Again { after, counted: false } => {
                    warn!("{tag}: not the job's fault ({why}); prep again in {after:?}");
                    self.watch.sleep(after);
                }
                Next::Again { after, counted: true } => {
                    warn!("{tag}: prep try {} failed: {why}; again in {after:?}", tries.counted());
                    self.watch.sleep(after);
                }
                Next::Refused => {
                    warn!("{tag}: {why}");
                    *self.refused.lock().unwrap_or_else(|e| e.into_inner()) = Some(why.clone());
                    let _ = self.wake.send(Event::Wake);
                    return;
                }
                Next::Abort(AbortReason::Drain) => {
                    return self.abort(&mut spool, claim, AbortReason::Drain, "drain: stopped during prep")
                }
                Next::Abort(reason) => {
                    match fault {
                        Fault::Bad(_) => warn!("{tag}: cannot be judged: {why}"),
                        _ => warn!("{tag}: prep failed {} times: {why}", tries.counted()),
                    }
                    return self.abort(&mut spool, claim, reason, why);
                }
            }
        }
    }

    fn abort(&self, spool: &mut Spool, claim: &ClaimRow, reason: AbortReason, why: &str) {
        match spool.abort(claim.id, reason, why) {
            Ok(true) => {
                info!("job {} claim {}: handed back as abort({})", claim.job_id, claim.id, reason.as_str());
                let _ = std::fs::remove_dir_all(spool.claim_dir(claim.id));
                control::poke(spool.dir(), "reportd");
            }
            Ok(false) => {}
            Err(e) => error!("job {} claim {}: {e}", claim.job_id, claim.id),
        }
    }
}
