//! `reportd`: delivers outcomes (`complete`, `abort`) and progress events to
//! the hub, patiently.
//!
//! An outcome leaves the spool only when the hub has answered finally (204
//! for `complete`, 202 for `abort`, 404, 409: [`outcome::delivery`]), in the
//! same transaction that marks its claim reported; a crash between the
//! answer and that commit sends it once more, which the hub answers as a
//! duplicate. A result the hub rejects (400, 413) is kept as evidence and
//! the claim goes back as `abort(rejected)`. Through everything else
//! (refused connections, timeouts, 401, 408, 429, 5xx, redirects, other
//! 2xx, a proxy's page) it waits 1, 2, 4, 8, then 15 s, and keeps offering
//! the outcome for two hours before moving it aside (`dead_outcomes`).
//! On TERM it keeps sending until the outbox is empty, then exits.
//! Requests wait on a thread of their own ([`daemon::serving`]): a hub
//! that hangs leaves the control socket answered, and SIGQUIT (or a second
//! TERM) abandons the request in flight; its outcome stays queued.

use crate::answer::{Answer, HttpReply, HubCall};
use crate::config::{self, Common};
use crate::control::Event;
use crate::daemon::{self, Daemon, Failure};
use crate::hub::HubClient;
use crate::metrics;
use crate::outcome::{self, Delivery, Meaning, OutcomeKind};
use crate::patience;
use crate::signals::Shutdown;
use crate::spool::{now_ms, OutboxItem, Spool};
use log::{error, info, warn};
use ojrunner_daemon::clock;
use ojrunner_daemon::stage::{self, Serve, Stage, State, Tick};
use ojrunner_daemon::ExitCode;
use serde_json::json;
use std::collections::HashMap;
use std::time::Duration;

/// Event lines sent in one batch.
pub const EVENT_BATCH: usize = 200;

/// The most bytes of event lines a batch carries: a hub caps small bodies
/// (hubd at 64 KiB), and a batch it refuses as too large is dropped.
pub const EVENT_BATCH_BYTES: usize = 48 << 10;

/// Runs reportd with the configuration `c` until `shutdown` stops it (or
/// the hub's answers do); the exit code says why it stopped. The first
/// TERM delivers what is queued, then stops; a second, or QUIT, stops at
/// once ([`stage::run`]).
pub fn run(c: &Common, shutdown: Shutdown) -> Result<ExitCode, Failure> {
    let hub = c.hub_client("")?;
    let Daemon { spool, inbox } = Daemon::start("reportd", &c.spool, shutdown)?;
    config::notify_ready(c.notify_fd);
    let mut r = Reporter {
        spool,
        hub,
        event_retry: HashMap::new(),
        sent: 0,
        last_answer: String::new(),
        in_flight: None,
        woken: false,
        said: false,
        swept: None,
    };
    stage::run(&mut r, inbox)
}

/// A claim's progress events the hub did not take at their last try.
#[derive(Clone, Copy, Debug)]
struct EventsWait {
    /// Tries failed in a row.
    tries: usize,
    /// When the next is due (ms).
    at: i64,
    /// The last got no answer at all: the hub is away, or was a moment ago.
    away: bool,
}

struct Reporter {
    spool: Spool,
    hub: HubClient,
    /// Claims whose events the hub could not take, and when to try again.
    event_retry: HashMap<i64, EventsWait>,
    sent: u64,
    last_answer: String,
    /// The request to the hub in flight, if one is, and since when.
    in_flight: Option<(String, std::time::Instant)>,
    /// A wake-up came (something new in the outbox), perhaps while
    /// delivering: the main loop looks again before it waits.
    woken: bool,
    /// Draining, it said once how much is left to deliver.
    said: bool,
    /// When ended claims were last swept.
    swept: Option<std::time::Instant>,
}

impl Stage for Reporter {
    fn tick(&mut self, serve: &mut Serve) -> Result<Tick, Failure> {
        // What is owed now lives in a spool nobody reads: leased hands the
        // jobs back, or their leases expire; either way they are judged again.
        if let Some(why) = self.spool.gone() {
            return Err(daemon::spool_gone(why));
        }
        if self.swept.is_none_or(|t| t.elapsed() > Duration::from_secs(3600)) {
            self.sweep();
            self.swept = Some(std::time::Instant::now());
        }
        let looked = self.deliver(serve);
        if serve.stopping() {
            return Ok(Tick::Busy(Duration::ZERO));
        }
        // What is left, and when its next try is due (if it could look).
        let (left, next) = self.spool.outbox_len().unwrap_or((0, None));
        let wait = next
            .filter(|_| looked)
            .map(|t| Duration::from_millis((t - now_ms()).max(0) as u64))
            .unwrap_or(patience::spool_poll())
            .min(patience::spool_poll());
        let wait = if std::mem::take(&mut self.woken) { Duration::ZERO } else { wait };
        if left == 0 {
            return Ok(Tick::Idle(wait));
        }
        if serve.draining() && !std::mem::replace(&mut self.said, true) {
            info!("stopping once the {left} queued outcome(s) are delivered");
        }
        Ok(Tick::Busy(wait))
    }

    fn event(&mut self, event: Event, _: State) {
        if let Event::Wake = event {
            self.woken = true;
        }
    }

    fn status(&self, _: State) -> serde_json::Value {
        let (depth, next) = self.spool.outbox_len().unwrap_or((-1, None));
        let in_flight =
            self.in_flight.as_ref().map(|(what, t)| json!({"what": what, "ms": t.elapsed().as_millis() as u64}));
        json!({"stage": "reportd", "outbox": depth, "next_try_at_ms": next, "dead": self.spool.dead_count().ok(),
               "sent": self.sent, "last_answer": self.last_answer, "in_flight": in_flight})
    }

    fn drain(&mut self, _why: &str) {}

    fn stop(&mut self, why: &str) -> ExitCode {
        let (left, _) = self.spool.outbox_len().unwrap_or((0, None));
        info!("{why}: stopped at once; {left} outcome(s) stay in the spool for the next run");
        ExitCode::Ok
    }

    fn finished(&mut self) -> ExitCode {
        info!("outbox empty: stopped");
        ExitCode::Ok
    }
}

/// How long ended claims stay in the spool, for whoever investigates.
const KEEP_ENDED: Duration = Duration::from_secs(7 * 24 * 3600);

impl Reporter {
    /// Runs `ask`, a request to the hub described by `what`, serving the
    /// inbox meanwhile ([`daemon::serving`]); `None` if the stage must
    /// stop at once (the request is abandoned).
    fn ask<T: Send + 'static>(
        &mut self,
        serve: &mut Serve,
        what: String,
        ask: impl FnOnce(&HubClient) -> T + Send + 'static,
    ) -> Option<T> {
        // A stop that came since the last request is heard before this one.
        if !serve.serve(self, Duration::ZERO) {
            return None;
        }
        let hub = self.hub.clone();
        self.in_flight = Some((what, std::time::Instant::now()));
        let answer = daemon::serving(move || ask(&hub), || serve.serve(self, Duration::ZERO));
        self.in_flight = None;
        answer
    }

    /// Forgets old ended claims and removes the directories of ended ones.
    fn sweep(&mut self) {
        match self.spool.prune_ended(now_ms().saturating_sub(clock::ms(KEEP_ENDED))) {
            Ok(n) if n > 0 => info!("forgot {n} claim(s) ended more than {} days ago", KEEP_ENDED.as_secs() / 86400),
            Ok(_) => {}
            Err(e) => warn!("{e}"),
        }
        if let Ok(n @ 1..) = self.spool.sweep_dirs() {
            info!("removed {n} work director(ies) of ended claims");
        }
    }

    /// Sends what is due; false when it could not look (no identity yet,
    /// the outbox unreadable).
    fn deliver(&mut self, serve: &mut Serve) -> bool {
        let Ok(Some(id)) = self.spool.identity() else {
            return false;
        };
        self.spool.drop_lost();
        self.send_events(serve, &id.runner_id, &id.token);
        let due = match self.spool.outbox_due(now_ms()) {
            Ok(d) => d,
            Err(e) => {
                error!("{e}");
                return false;
            }
        };
        for item in due {
            if serve.stopping() {
                break;
            }
            if item.runner_id != id.runner_id {
                // Claimed under an identity the hub no longer knows: it
                // cannot be delivered, and the hub has reclaimed the job.
                let _ = self.spool.outbox_bury(item.claim_id, "claimed under a previous identity");
                continue;
            }
            // A job's progress goes before its outcome: tried now, whatever
            // its own schedule (a hub back from away takes both in order).
            self.send_events_of(serve, item.claim_id, &item.job_id, &id.runner_id, &id.token, true);
            if serve.stopping() {
                break;
            }
            // Events the hub could not take now would be refused once the
            // outcome lands: the outcome waits for their next try (a while).
            // A hub that did not answer them at all is away: an outcome sent
            // now, a moment later, might be the first call it answers on its
            // return, before the events; it counts as the outcome's own
            // failed try (patience::outcome_kept still ends a hub away for good).
            if let Some(w) = self.event_retry.get(&item.claim_id).copied() {
                if w.away {
                    self.postpone(&item, "the hub did not answer its progress events, which go first");
                    continue;
                }
                if w.tries < patience::OUTCOME_WAITS_FOR_EVENTS {
                    let why = "waiting for its progress events to be taken first";
                    if let Err(e) = self.spool.outbox_later(item.claim_id, w.at, why) {
                        error!("job {} claim {}: {e}", item.job_id, item.claim_id);
                    }
                    continue;
                }
            }
            self.send(serve, &item, &id.token);
        }
        true
    }

    fn send(&mut self, serve: &mut Serve, item: &OutboxItem, token: &str) {
        let tag = format!("job {} claim {}", item.job_id, item.claim_id);
        let what = item.kind.shown();
        let (runner, token, job, body) =
            (item.runner_id.clone(), token.to_string(), item.job_id.clone(), item.body.clone());
        let kind = item.kind;
        let asked = self.ask(serve, format!("{tag} {what}"), move |h| match kind {
            OutcomeKind::Complete => h.complete(&runner, &token, &job, &body),
            OutcomeKind::Abort(_) => h.abort(&runner, &token, &job, &body),
        });
        let Some(answer) = asked else { return };
        metrics::count_hub_answer(&mut self.spool, item.kind.call(), &answer);
        self.last_answer = format!("{tag} {what}: {}", answer.describe());
        let r = match outcome::delivery(item.kind, &answer) {
            Delivery::Delivered => {
                info!("{tag}: {what} delivered");
                self.sent += 1;
                self.settle(item, "delivered")
            }
            Delivery::NotHeld => {
                info!("{tag}: {what}: {}: the hub no longer holds it for us; dropped", answer.describe());
                self.settle(item, &format!("hub answered {}", answer.describe()))
            }
            Delivery::Reject => {
                let why = answer.describe();
                warn!("{tag}: the hub rejected the result ({why}); evidence kept, sending abort(rejected)");
                self.keep_evidence(item);
                self.spool.outbox_reject(item.claim_id, &format!("complete rejected: {why}"))
            }
            Delivery::AbortRefused => {
                error!("{tag}: the hub refused {what} ({}); dropped", answer.describe());
                self.settle(item, &format!("{what} refused: {}", answer.describe()))
            }
            Delivery::Again => return self.postpone(item, &answer.describe()),
        };
        if let Err(e) = r {
            error!("{tag}: {e}");
        }
    }

    fn settle(&mut self, item: &OutboxItem, note: &str) -> crate::spool::Result<()> {
        self.spool.outbox_settle(item.claim_id, note)?;
        // The claim is no longer held: a claimd at its limit may claim again.
        crate::control::poke(self.spool.dir(), "claimd");
        self.event_retry.remove(&item.claim_id);
        let _ = std::fs::remove_dir_all(self.spool.claim_dir(item.claim_id));
        Ok(())
    }

    fn postpone(&mut self, item: &OutboxItem, why: &str) {
        let tag = format!("job {} claim {}", item.job_id, item.claim_id);
        let age = Duration::from_millis((now_ms() - item.created_at).max(0) as u64);
        if age > patience::outcome_kept() {
            error!("{tag}: undeliverable for {age:?} ({why}); moved aside to dead_outcomes");
            if let Err(e) = self.spool.outbox_bury(item.claim_id, why) {
                error!("{tag}: {e}");
            }
            return;
        }
        let delay = patience::PATIENT.delay(item.tries as usize + 1).unwrap_or(Duration::from_secs(15));
        warn!("{tag}: not delivered ({why}); again in {delay:?}");
        if let Err(e) = self.spool.outbox_later(item.claim_id, clock::after_ms(now_ms(), delay), why) {
            error!("{tag}: {e}");
        }
    }

    /// The claim's directory, kept aside when the hub refuses its result.
    fn keep_evidence(&self, item: &OutboxItem) {
        let from = self.spool.claim_dir(item.claim_id);
        let to = self.spool.dir().join("evidence").join(format!("{}-{}", item.job_id, item.claim_id));
        let _ = std::fs::create_dir_all(to.parent().unwrap());
        let _ = std::fs::rename(&from, &to);
        let _ = std::fs::write(to.with_extension("json"), &item.body);
    }

    fn send_events(&mut self, serve: &mut Serve, runner_id: &str, token: &str) {
        let Ok(claims) = self.spool.event_claims() else { return };
        for (claim_id, job_id, owner) in claims {
            if owner == runner_id {
                self.send_events_of(serve, claim_id, &job_id, runner_id, token, false);
            }
        }
    }

    /// Sends a claim's queued events, 200 at a time, until none are left or
    /// the hub cannot take them (they stay for the next batch). Not before
    /// their next try is due, unless `now`.
    fn send_events_of(
        &mut self,
        serve: &mut Serve,
        claim_id: i64,
        job_id: &str,
        runner_id: &str,
        token: &str,
        now: bool,
    ) {
        if let Some(EventsWait { at, .. }) = self.event_retry.get(&claim_id) {
            if *at > now_ms() && !now {
                return;
            }
        }
        loop {
            let Ok((rows, lost)) = self.spool.events(claim_id, EVENT_BATCH) else { return };
            if rows.is_empty() {
                self.event_retry.remove(&claim_id);
                return;
            }
            // Each line as it is sent (parsed and written again, not as
            // stored), so that the batch is measured as the hub reads it.
            let mut events: Vec<String> = Vec::with_capacity(rows.len() + 1);
            if lost > 0 {
                let line = json!({"t": 0, "kind": "lost", "count": lost,
                                  "message": format!("{lost} event lines lost while the hub could not take them")});
                events.push(line.to_string());
            }
            let most = if lost > 0 { rows.len().min(EVENT_BATCH - 1) } else { rows.len() };
            // At least one line; then as many as keep the body small.
            let mut bytes: usize = events.iter().map(|e| e.len() + 1).sum();
            for (i, r) in rows[..most].iter().enumerate() {
                let event = serde_json::from_str::<serde_json::Value>(&r.body)
                    .unwrap_or(json!({"kind": "unreadable"}))
                    .to_string();
                bytes += event.len() + 1;
                if i > 0 && bytes > EVENT_BATCH_BYTES {
                    break;
                }
                events.push(event);
            }
            let take = events.len() - usize::from(lost > 0);
            let body = format!(r#"{{"events":[{}]}}"#, events.join(","));
            let last_id = rows[take - 1].id;
            let (runner, tok, job) = (runner_id.to_string(), token.to_string(), job_id.to_string());
            let asked = self.ask(serve, format!("job {job_id} claim {claim_id} events"), move |h| {
                h.events(&runner, &tok, &job, &body)
            });
            let Some(answer) = asked else { return };
            metrics::count_hub_answer(&mut self.spool, HubCall::Events, &answer);
            match outcome::classify(HubCall::Events, &answer) {
                Meaning::Settled => {
                    let _ = self.spool.events_sent(claim_id, last_id);
                    self.event_retry.remove(&claim_id);
                }
                Meaning::Final => {
                    info!("job {job_id} claim {claim_id}: the hub has no events channel for it; events dropped");
                    let _ = self.spool.events_drop(claim_id);
                    return;
                }
                Meaning::Rejected => {
                    // The same lines would be refused again: this batch goes.
                    warn!("job {job_id} claim {claim_id}: events refused ({}); this batch dropped", answer.describe());
                    let _ = self.spool.events_sent(claim_id, last_id);
                    self.event_retry.remove(&claim_id);
                }
                Meaning::Retry => {
                    let tries = self.event_retry.get(&claim_id).map_or(0, |w| w.tries) + 1;
                    let delay = patience::PATIENT.delay(tries).unwrap_or(Duration::from_secs(15));
                    warn!("job {job_id} claim {claim_id}: events: {}; kept for the next batch", answer.describe());
                    let away = matches!(answer, Answer::NoWord(HttpReply::Unreachable(_)));
                    let wait = EventsWait { tries, at: clock::after_ms(now_ms(), delay), away };
                    self.event_retry.insert(claim_id, wait);
                    return;
                }
            }
        }
    }
}
