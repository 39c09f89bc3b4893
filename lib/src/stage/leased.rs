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
use crate::control::{Event, Inbox};
use crate::counter::Counter;
use crate::daemon::{self, Daemon, Failure};
use crate::hub::HubClient;
use crate::lease;
use crate::metrics;
use crate::outcome::{self, Meaning};
use crate::patience;
use crate::protocol::AbortReason;
use crate::signals::{Shutdown, Stops};
use crate::spool::{RunnerIdentity, Spool};
use log::{error, info, warn};
use ojrunner_daemon::ExitCode;
use serde_json::json;
use std::time::{Duration, Instant};

/// Runs leased with the configuration `c` until `shutdown` stops it (or
/// the hub's answers do); the exit code says why it stopped.
pub fn run(c: &Common, shutdown: Shutdown) -> Result<ExitCode, Failure> {
    let hub = HubClient::new(&c.backend_url()?, &c.testdata_url()?, "");
    let Daemon { mut spool, inbox, stops } = Daemon::start("leased", &c.spool, shutdown)?;
    config::notify_ready(c.notify_fd);
    let drain_deadline = c.drain_timeout()?;
    let mut unauthorized = 0;
    // Beats in a row that got no 204 (401 aside).
    let mut failed = 0;
    let mut l = Leased {
        inbox,
        stops,
        last: Beat::default(),
        beating_since: None,
        stopping_since: None,
        beats: 0,
        note_failed: false,
    };
    // What the runner holds, as last read: kept here, so that a spool
    // deleted under the runner can still be handed back.
    let mut holding: Option<(RunnerIdentity, Vec<String>)> = None;
    loop {
        if let Some(why) = spool.gone() {
            error!("{why}");
            if let Some((id, jobs)) = &holding {
                hand_back(&hub, id, jobs);
            }
            return Err(daemon::spool_gone(why));
        }
        if l.stops.count() >= 2 {
            info!("stopped at once");
            return Ok(ExitCode::Ok);
        }
        if l.stops.requested() && l.stopping_since.is_none() {
            l.stopping_since = Some(Instant::now());
            info!("stopping once no job is held (leases stay renewed until the final sends)");
        }
        let id = spool.identity()?;
        if id.is_none() && l.stopping_since.is_some() {
            info!("stopped (no identity: nothing to keep)");
            return Ok(ExitCode::Ok);
        }
        let mut wait = patience::spool_poll();
        if let Some(id) = id {
            let interval = lease::interval(id.config.heartbeat_interval_sec);
            spool.drop_lost();
            let jobs = spool.held_jobs()?;
            holding = Some((id.clone(), jobs.clone()));
            if let Some(since) = l.stopping_since {
                if jobs.is_empty() || since.elapsed() > drain_deadline {
                    info!("stopped ({} job(s) still held)", jobs.len());
                    return Ok(ExitCode::Ok);
                }
            }
            // Due one interval after the last beat began (the time a beat
            // took is thereby taken off the wait for the next); sooner
            // after a beat that failed.
            let due = l.last.at.is_none_or(|t| t.elapsed() >= lease::next_beat(interval, failed));
            if due {
                let t0 = Instant::now();
                // The attempt, not its answer, is what keeps a claim ours:
                // noted when it begins, every second while the hub keeps it
                // waiting, and when it ends.
                let mut noted = Instant::now();
                l.note_beat(&spool);
                let (h, runner, token, held) = (hub.clone(), id.runner_id.clone(), id.token.clone(), jobs.clone());
                l.beating_since = Some(t0);
                let answer = daemon::serving(
                    move || h.heartbeat(&runner, &token, &held),
                    || {
                        if noted.elapsed() >= Duration::from_secs(1) {
                            l.note_beat(&spool);
                            noted = Instant::now();
                        }
                        l.serve(Duration::ZERO)
                    },
                );
                l.beating_since = None;
                let Some(answer) = answer else { return Ok(ExitCode::Ok) };
                l.note_beat(&spool);
                l.beats += 1;
                l.last = Beat { at: Some(t0), jobs: jobs.len(), answer: answer.describe() };
                metrics::count_hub_answer(&mut spool, HubCall::Heartbeat, &answer);
                let meaning = outcome::classify(HubCall::Heartbeat, &answer);
                if meaning != Meaning::Settled {
                    metrics::count(&mut spool, Counter::LeaseRenewalsFailed, "");
                }
                match meaning {
                    Meaning::Settled => {
                        unauthorized = 0;
                        failed = 0;
                    }
                    Meaning::Rejected => {
                        failed = 0;
                        unauthorized += 1;
                        warn!("heartbeat: 401 ({unauthorized} in a row)");
                        if unauthorized >= 2 {
                            let _ = spool.forget_identity(&id.runner_id);
                            error!("the hub no longer knows runner {}: exiting at once, without a drain", id.runner_id);
                            return Ok(ExitCode::Failure);
                        }
                    }
                    Meaning::Final | Meaning::Retry => {
                        unauthorized = 0;
                        failed += 1;
                        warn!("heartbeat for {} job(s): {}", jobs.len(), answer.describe());
                    }
                }
            }
            // The next beat is due `interval` after this one began (sooner
            // after a failed one).
            let next = lease::next_beat(interval, failed);
            wait = l.last.at.map(|t| (t + next).saturating_duration_since(Instant::now())).unwrap_or(wait).min(wait);
        }
        if !l.serve(wait) {
            return Ok(ExitCode::Ok);
        }
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

/// leased's own state, besides the spool.
struct Leased {
    inbox: Inbox,
    stops: Stops,
    last: Beat,
    /// When the beat in flight began, if one is.
    beating_since: Option<Instant>,
    stopping_since: Option<Instant>,
    /// Beats attempted since start.
    beats: u64,
    /// The last note of a beat failed (said once, not every second).
    note_failed: bool,
}

impl Leased {
    /// Notes the beat attempted in the spool, where the other stages read
    /// it ([`Spool::drop_lost_claims`]); a failure is said, and never left
    /// for them to read as a lease lost if it can be helped.
    fn note_beat(&mut self, spool: &Spool) {
        match spool.note_beat() {
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

    /// Serves the inbox: the first event within `wait`, then whatever else
    /// is there. False when the stage must stop at once (SIGQUIT, or a
    /// second SIGTERM), even in the middle of a beat.
    fn serve(&mut self, wait: Duration) -> bool {
        for ev in self.inbox.drain(wait) {
            match ev {
                Event::Command { cmd, reply, .. } => {
                    let _ = reply.send(if cmd == "status" {
                        json!({"stage": "leased", "jobs": self.last.jobs, "last_beat": self.last.answer,
                               "last_beat_ago_ms": self.last.at.map(|t| t.elapsed().as_millis() as u64),
                               "beat_in_flight_ms": self.beating_since.map(|t| t.elapsed().as_millis() as u64),
                               "beats": self.beats,
                               "stopping": self.stopping_since.is_some() || self.stops.requested()})
                    } else {
                        json!({"error": format!("unknown command {cmd:?}")})
                    });
                }
                Event::Signal(libc::SIGQUIT) => {
                    info!("SIGQUIT: stopped at once");
                    return false;
                }
                _ => {}
            }
            if self.stops.count() >= 2 {
                info!("stopped at once");
                return false;
            }
        }
        true
    }
}

#[derive(Default)]
struct Beat {
    at: Option<Instant>,
    jobs: usize,
    answer: String,
}
