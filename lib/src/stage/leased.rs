//! `leased`: keeps the lease of every job the runner still holds, by
//! heartbeats: one at start, then every `heartbeat_interval_sec` less the
//! time the last one took, so a slow beat never pushes the next past the
//! lease.
//!
//! It is also where a lease is given up for lost. The hub says nothing per
//! job, so the rule is the runner's own: a claim is lost when no heartbeat
//! was even attempted for it for longer than the lease (the runner was
//! down). A hub that is away does not make a lease lost here: the beats are
//! attempted, and a hub coming back honours them; a beat it keeps waiting is
//! an attempt all along. Two 401 in a row mean the
//! identity is gone: `leased` forgets it and exits 1 at once, without a
//! drain; a restarted runner registers again.
//!
//! A beat that got no 204 (no connection, a 5xx) is tried again after 1,
//! then every 2 s ([`patience::BEAT_AGAIN`]), not a whole interval later: a
//! hub away for a few seconds across a beat would otherwise see no beat for
//! up to two intervals, the whole lease, and hand the job out again.
//!
//! A beat waits on a thread of its own ([`daemon::serving`]): while a hub
//! that hangs keeps it waiting (up to the request's timeout), the control
//! socket is answered, and SIGQUIT or a second TERM still stops at once.

use crate::answer::HubCall;
use crate::config::{self, Common};
use crate::counter::Counter;
use crate::daemon::{self, Daemon, Failure};
use crate::hub::HubClient;
use crate::lease;
use crate::metrics;
use crate::outcome::{self, Meaning};
use crate::patience;
use crate::protocol::AbortReason;
use crate::signals::Shutdown;
use crate::spool::{RunnerIdentity, Spool};
use log::{error, info, warn};
use ojrunner_daemon::stage::{self, Serve, Stage, State, Tick};
use ojrunner_daemon::ExitCode;
use serde_json::json;
use std::time::{Duration, Instant};

/// Runs leased with the configuration `c` until `shutdown` stops it (or
/// the hub's answers do); the exit code says why it stopped. The first
/// TERM keeps beating until no job is held or the drain's deadline; a
/// second, or QUIT, stops at once ([`stage::run`]).
pub fn run(c: &Common, shutdown: Shutdown) -> Result<ExitCode, Failure> {
    let hub = c.hub_client("")?;
    let Daemon { spool, inbox } = Daemon::start("leased", &c.spool, shutdown)?;
    config::notify_ready(c.notify_fd);
    let mut l = Leased {
        spool,
        hub,
        drain_deadline: c.drain_timeout()?,
        streak: Streak::Clear,
        holding: None,
        last: Beat::default(),
        beating_since: None,
        beats: 0,
        note_failed: false,
    };
    stage::run(&mut l, inbox)
}

/// The beats in a row that did not get a 204: the two kinds reset each
/// other, so one enum.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Streak {
    /// The last beat got its 204 (or none was tried).
    Clear,
    /// Beats in a row that got no 204, and no 401.
    Failed(u32),
    /// Beats in a row answered 401: two, and the identity is gone.
    Refused(u32),
}

impl Streak {
    /// Beats in a row that failed (a refusal is not a failure).
    fn failed(self) -> usize {
        match self {
            Streak::Failed(n) => n as usize,
            Streak::Clear | Streak::Refused(_) => 0,
        }
    }
}

impl Stage for Leased {
    fn tick(&mut self, serve: &mut Serve) -> Result<Tick, Failure> {
        if let Some(why) = self.spool.gone() {
            error!("{why}");
            if let Some((id, jobs)) = &self.holding {
                hand_back(&self.hub, id, jobs);
            }
            return Err(daemon::spool_gone(why));
        }
        let Some(id) = self.spool.identity()? else {
            // No identity: nothing to keep (a drain is over at once).
            return Ok(Tick::Idle(patience::spool_poll()));
        };
        let wait = patience::spool_poll();
        let interval = lease::interval(id.config.heartbeat_interval_sec);
        self.spool.drop_lost();
        let jobs = self.spool.held_jobs()?;
        self.holding = Some((id.clone(), jobs.clone()));
        if !serve.running() && jobs.is_empty() {
            return Ok(Tick::Idle(wait));
        }
        let failed = self.streak.failed();
        // Due one interval after the last beat began (the time a beat
        // took is thereby taken off the wait for the next); sooner
        // after a beat that failed.
        let due = self.last.at.is_none_or(|t| t.elapsed() >= lease::next_beat(interval, failed));
        if due {
            let t0 = Instant::now();
            // The attempt, not its answer, is what keeps a claim ours:
            // noted when it begins, every second while the hub keeps it
            // waiting, and when it ends.
            let mut noted = Instant::now();
            self.note_beat();
            let (h, runner, token, held) = (self.hub.clone(), id.runner_id.clone(), id.token.clone(), jobs.clone());
            self.beating_since = Some(t0);
            let answer = daemon::serving(
                move || h.heartbeat(&runner, &token, &held),
                || {
                    if noted.elapsed() >= Duration::from_secs(1) {
                        self.note_beat();
                        noted = Instant::now();
                    }
                    serve.serve(self, Duration::ZERO)
                },
            );
            self.beating_since = None;
            // Abandoned: the run is stopping at once.
            let Some(answer) = answer else { return Ok(Tick::Busy(Duration::ZERO)) };
            self.note_beat();
            self.beats += 1;
            self.last = Beat { at: Some(t0), jobs: jobs.len(), answer: answer.describe() };
            metrics::count_hub_answer(&mut self.spool, HubCall::Heartbeat, &answer);
            let meaning = outcome::classify(HubCall::Heartbeat, &answer);
            if meaning != Meaning::Settled {
                metrics::count(&mut self.spool, Counter::LeaseRenewalsFailed, "");
            }
            self.streak = match (meaning, self.streak) {
                (Meaning::Settled, _) => Streak::Clear,
                (Meaning::Rejected, streak) => {
                    let n = if let Streak::Refused(n) = streak { n + 1 } else { 1 };
                    warn!("heartbeat: 401 ({n} in a row)");
                    if n >= 2 {
                        let _ = self.spool.forget_identity(&id.runner_id);
                        error!("the hub no longer knows runner {}: exiting at once, without a drain", id.runner_id);
                        return Ok(Tick::Exit(ExitCode::Failure));
                    }
                    Streak::Refused(n)
                }
                (Meaning::Final | Meaning::Retry, streak) => {
                    warn!("heartbeat for {} job(s): {}", jobs.len(), answer.describe());
                    Streak::Failed(if let Streak::Failed(n) = streak { n + 1 } else { 1 })
                }
            };
        }
        // The next beat is due `interval` after this one began (sooner
        // after a failed one).
        let next = lease::next_beat(interval, self.streak.failed());
        let wait = self.last.at.map(|t| (t + next).saturating_duration_since(Instant::now())).unwrap_or(wait).min(wait);
        Ok(Tick::Busy(wait))
    }

    fn status(&self, state: State) -> serde_json::Value {
        json!({"stage": "leased", "jobs": self.last.jobs, "last_beat": self.last.answer,
               "last_beat_ago_ms": self.last.at.map(|t| t.elapsed().as_millis() as u64),
               "beat_in_flight_ms": self.beating_since.map(|t| t.elapsed().as_millis() as u64),
               "beats": self.beats,
               "stopping": state != State::Running})
    }

    fn drain(&mut self, _why: &str) {
        info!("stopping once no job is held (leases stay renewed until the final sends)");
    }

    fn finished(&mut self) -> ExitCode {
        match (self.spool.identity(), &self.holding) {
            (Ok(None), _) | (_, None) => info!("stopped (no identity: nothing to keep)"),
            (_, Some((_, jobs))) => info!("stopped ({} job(s) still held)", jobs.len()),
        }
        ExitCode::Ok
    }

    fn deadline(&self) -> Option<Duration> {
        Some(self.drain_deadline)
    }
}

/// Hands every job in `jobs` back to the hub as `abort(drain)`, once each,
/// straight from memory: the spool that would have kept the outcomes is
/// gone. `drain` costs no attempt: the runner's trouble is not the job's.
/// A job whose result already landed answers 409 or 404, and stays judged;
/// one the hub does not hear about is judged again when its lease expires.
fn hand_back(hub: &HubClient, id: &RunnerIdentity, jobs: &[String]) {
    let body = outcome::abort_body(AbortReason::Drain);
    for job in jobs {
        let answer = hub.abort(&id.runner_id, &id.token, job, &body);
        match outcome::classify(HubCall::Abort, &answer) {
            Meaning::Settled => info!("job {job}: handed back as abort(drain)"),
            Meaning::Rejected | Meaning::Final | Meaning::Retry => {
                warn!("job {job}: handing it back: {}; its lease expires instead", answer.describe())
            }
        }
    }
}

/// leased's own state.
struct Leased {
    spool: Spool,
    hub: HubClient,
    /// How long a drain keeps beating for jobs still held.
    drain_deadline: Duration,
    streak: Streak,
    /// What the runner holds, as last read: kept here, so that a spool
    /// deleted under the runner can still be handed back.
    holding: Option<(RunnerIdentity, Vec<String>)>,
    last: Beat,
    /// When the beat in flight began, if one is.
    beating_since: Option<Instant>,
    /// Beats attempted since start.
    beats: u64,
    /// The last note of a beat failed (said once, not every second).
    note_failed: bool,
}

impl Leased {
    /// Notes the beat attempted in the spool, where the other stages read
    /// it ([`Spool::drop_lost_claims`]); a failure is said, and never left
    /// for them to read as a lease lost if it can be helped.
    fn note_beat(&mut self) {
        match self.spool.note_beat() {
            Ok(()) if self.note_failed => {
                self.note_failed = false;
                info!("the beat stamp is written again");
            }
            Ok(()) => {}
            Err(e) if !self.note_failed => {
                self.note_failed = true;
                error!("{e}: the other stages may take the leases held for lost");
            }
            Err(_) => {}
        }
    }
}

#[derive(Default)]
struct Beat {
    at: Option<Instant>,
    jobs: usize,
    answer: String,
}
