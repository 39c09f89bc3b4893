//! The one loop every stage runs in, and its stop policy.
//!
//! A stage (claimd, judge-exec, reportd, leased, runnerd) is a [`Stage`]:
//! it does one pass of its work ([`Stage::tick`]), takes the events that
//! are its own ([`Stage::event`]: a wake-up, SIGHUP, a command), and says
//! how it is ([`Stage::status`]). How it stops is not its business: the
//! loop ([`run`]) hears TERM, INT, QUIT and the control socket's `drain`,
//! keeps the [`State`] the run is in, and moves it by one table,
//! [`POLICY`], a row per state and a column per [`Cause`], as
//! s6-supervise's `actions[state][event]`. "The first TERM drains, the
//! second stops at once" is two cells of it; no stage counts signals.
//!
//! A stage whose pass waits on the hub serves its inbox meanwhile through
//! [`Serve::serve`], which applies the same table: a status is answered
//! during a long poll, and a stop at once is heard in the middle of a
//! beat. The stage's own threads see the state through a [`Watch`].
//!
//! What ends a run besides the table: a stage's own fault or refusal
//! ([`Tick::Exit`], or an error), in any state: that is not a stop.

use crate::control::{Event, Inbox};
use crate::exit::ExitCode;
use crate::failure::Failure;
use crate::signals;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Where a run is, as far as stopping goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// Doing its work.
    Running,
    /// Starting nothing new, finishing what it holds, then exiting.
    Draining,
    /// Stopping at once: what can be abandoned is, and the run ends at the
    /// stage's next turn (a request that must be read to its end first is).
    Stopping,
}

/// What may move a run from its state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cause {
    /// SIGTERM or SIGINT: a supervisor's stop, a terminal's ^C.
    Term,
    /// SIGQUIT.
    Quit,
    /// `{"cmd":"drain"}` on the control socket, for a stage that takes it
    /// ([`Stage::DRAIN_COMMAND`]).
    DrainCommand,
    /// The stage asks for a drain itself (runnerd, when claimd found the
    /// configuration wrong).
    Asked,
    /// A pass found nothing held that a drain must finish ([`Tick::Idle`]).
    Idle,
    /// The stage's drain deadline passed ([`Stage::deadline`]).
    Deadline,
}

/// What the loop does on a cause, in a state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Nothing: the state stays.
    Stay,
    /// Begin draining ([`Stage::drain`]).
    Drain,
    /// Stop at once ([`Stage::stop`] gives the exit code).
    Stop,
    /// The drain is over: exit ([`Stage::finished`] gives the exit code).
    Exit,
}

const CAUSES: usize = 6;

/// The stop policy: `POLICY[state][cause]`, the one place it is decided.
/// Columns in [`Cause`]'s order: Term, Quit, DrainCommand, Asked, Idle,
/// Deadline.
///
/// A drain asked twice is one drain; a stop or a QUIT while draining stops
/// at once; once stopping, nothing changes that. Holding nothing matters
/// only to a drain, and so does its deadline.
#[rustfmt::skip]
pub const POLICY: [[Action; CAUSES]; 3] = {
    use Action::*;
    [
        //              Term   Quit  DrainCommand  Asked  Idle  Deadline
        /* Running  */ [Drain, Stop, Drain,        Drain, Stay, Stay],
        /* Draining */ [Stop,  Stop, Stay,         Stay,  Exit, Exit],
        /* Stopping */ [Stay,  Stay, Stay,         Stay,  Stay, Stay],
    ]
};

/// The cell of [`POLICY`] for `state` and `cause`.
pub fn action(state: State, cause: Cause) -> Action {
    POLICY[state as usize][cause as usize]
}

/// What a pass of a stage's work says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tick {
    /// It holds work a drain must finish: look again within this long.
    Busy(Duration),
    /// It holds nothing a drain must finish ([`Cause::Idle`]): look again
    /// within this long, unless the policy ends the run.
    Idle(Duration),
    /// It ends on its own (a fault, a refusal), with this code.
    Exit(ExitCode),
}

/// A stage run by [`run`].
pub trait Stage {
    /// Whether the control socket's `drain` command drains it (runnerd);
    /// other stages answer it as an unknown command.
    const DRAIN_COMMAND: bool = false;

    /// One pass of its work. It may serve its inbox meanwhile
    /// ([`Serve::serve`]); once [`Serve::stopping`], it returns soon.
    fn tick(&mut self, serve: &mut Serve) -> Result<Tick, Failure>;

    /// An event that is neither a stop nor a command (a command other than
    /// `status`, or `drain` where it drains, is answered as unknown): a
    /// wake-up, SIGHUP, CONT.
    fn event(&mut self, _event: Event, _state: State) {}

    /// Its answer to `status`.
    fn status(&self, state: State) -> Value;

    /// The drain begins (`why`: what began it, for the log).
    fn drain(&mut self, why: &str) {
        log::info!("{why}");
    }

    /// It stops at once (`why`: what stopped it); the exit code.
    fn stop(&mut self, why: &str) -> ExitCode {
        log::info!("{why}: stopped at once");
        ExitCode::Ok
    }

    /// Its drain is over; the exit code.
    fn finished(&mut self) -> ExitCode {
        log::info!("stopped");
        ExitCode::Ok
    }

    /// How long its drain may last before it ends with work left (none:
    /// as long as it takes).
    fn deadline(&self) -> Option<Duration> {
        None
    }
}

/// The answer to a command a stage does not take.
fn unknown(cmd: &str) -> Value {
    json!({"error": format!("unknown command {cmd:?}")})
}

/// A run's state as its stage's own threads see it (a prep that must hand
/// its claim back once a drain begins, a retry sleep cut short).
#[derive(Clone, Debug)]
pub struct Watch(Arc<AtomicU8>);

/// [`Watch`]'s bit for "a drain began", kept when a stop at once follows.
const DRAIN_BEGUN: u8 = 4;

impl Watch {
    fn new() -> Watch {
        Watch(Arc::new(AtomicU8::new(State::Running as u8)))
    }

    fn set(&self, state: State) {
        let began = if state == State::Draining { DRAIN_BEGUN } else { self.0.load(Ordering::SeqCst) & DRAIN_BEGUN };
        self.0.store(state as u8 | began, Ordering::SeqCst);
    }

    /// The run's state.
    pub fn state(&self) -> State {
        match self.0.load(Ordering::SeqCst) & !DRAIN_BEGUN {
            0 => State::Running,
            1 => State::Draining,
            _ => State::Stopping,
        }
    }

    /// Whether the run still runs (no drain, no stop).
    pub fn running(&self) -> bool {
        self.state() == State::Running
    }

    /// Whether a drain began, whether or not a stop at once followed it: a
    /// thread hands back what it holds then. A stop at once without a drain
    /// (QUIT) leaves it as it is, for the next run.
    pub fn drain_begun(&self) -> bool {
        self.0.load(Ordering::SeqCst) & DRAIN_BEGUN != 0
    }

    /// Sleeps `d`, or less if a drain begins; true if one did.
    pub fn sleep(&self, d: Duration) -> bool {
        let end = crate::clock::deadline(d);
        while !self.drain_begun() {
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            std::thread::sleep(left.min(Duration::from_millis(20)));
        }
        true
    }
}

/// The loop's side of a run, handed to each pass: the inbox, the state,
/// and the table that moves it.
pub struct Serve {
    inbox: Inbox,
    watch: Watch,
    state: State,
    /// When the drain began, while it runs.
    drain_began: Option<Instant>,
    /// What stopped the run, once it is stopping.
    stopped_by: String,
    /// The exit code of a drain that is over ([`Action::Exit`]).
    ended: Option<ExitCode>,
}

impl Serve {
    fn new(inbox: Inbox) -> Serve {
        Serve {
            inbox,
            watch: Watch::new(),
            state: State::Running,
            drain_began: None,
            stopped_by: String::new(),
            ended: None,
        }
    }

    pub fn state(&self) -> State {
        self.state
    }

    pub fn running(&self) -> bool {
        self.state == State::Running
    }

    pub fn draining(&self) -> bool {
        self.state == State::Draining
    }

    /// Whether the run ends at the next turn (stopping at once, or its
    /// drain over): the stage abandons what it can and returns.
    pub fn stopping(&self) -> bool {
        self.state == State::Stopping || self.ended.is_some()
    }

    /// The state, for the stage's threads.
    pub fn watch(&self) -> Watch {
        self.watch.clone()
    }

    /// Where wake-ups for the stage's own loop are sent (its threads'
    /// "look again").
    pub fn waker(&self) -> std::sync::mpsc::Sender<Event> {
        self.inbox.tx.clone()
    }

    /// Serves the inbox: the first event within `wait`, then whatever else
    /// is there. False once the run is stopping: the caller abandons what
    /// it can and returns.
    pub fn serve<S: Stage>(&mut self, stage: &mut S, wait: Duration) -> bool {
        let mut first = Some(wait);
        while let Some(event) = self.inbox.next(first.take().unwrap_or(Duration::ZERO)) {
            self.take(stage, event);
        }
        !self.stopping()
    }

    /// The stage asks for a drain (`why`, for the log).
    pub fn ask_drain<S: Stage>(&mut self, stage: &mut S, why: &str) {
        self.on(stage, Cause::Asked, why);
    }

    fn take<S: Stage>(&mut self, stage: &mut S, event: Event) {
        match event {
            Event::Signal(sig @ (libc::SIGTERM | libc::SIGINT)) => {
                let name = signals::name(sig);
                let why = if self.state == State::Running { name } else { format!("second {name}") };
                self.on(stage, Cause::Term, &why);
            }
            Event::Signal(libc::SIGQUIT) => self.on(stage, Cause::Quit, "SIGQUIT"),
            Event::Command { cmd, reply, .. } if cmd == "status" => {
                let _ = reply.send(stage.status(self.state));
            }
            Event::Command { cmd, reply, .. } if cmd == "drain" && S::DRAIN_COMMAND => {
                self.on(stage, Cause::DrainCommand, "drain command");
                let _ = reply.send(json!({"ok": true, "draining": true}));
            }
            Event::Command { cmd, reply, .. } => {
                let _ = reply.send(unknown(&cmd));
            }
            event => stage.event(event, self.state),
        }
    }

    /// Applies [`POLICY`] to `cause` (`why`, for the log).
    fn on<S: Stage>(&mut self, stage: &mut S, cause: Cause, why: &str) {
        match action(self.state, cause) {
            Action::Stay => {}
            Action::Drain => {
                self.enter(State::Draining);
                self.drain_began = Some(Instant::now());
                stage.drain(why);
            }
            Action::Stop => {
                self.enter(State::Stopping);
                self.stopped_by = why.to_string();
            }
            Action::Exit => {
                if self.ended.is_none() {
                    self.ended = Some(stage.finished());
                }
            }
        }
    }

    fn enter(&mut self, state: State) {
        self.state = state;
        self.watch.set(state);
    }
}

/// Runs `stage` until the policy or the stage ends it, taking its events
/// from `inbox` (its control socket and its signals feed it). From here on
/// the stage must not die: its pass retries what is recoverable and ends
/// the run only by returning.
pub fn run<S: Stage>(stage: &mut S, inbox: Inbox) -> Result<ExitCode, Failure> {
    let mut serve = Serve::new(inbox);
    loop {
        if let Some(code) = serve.ended {
            return Ok(code);
        }
        if serve.state == State::Stopping {
            let why = std::mem::take(&mut serve.stopped_by);
            return Ok(stage.stop(&why));
        }
        if serve.drain_began.zip(stage.deadline()).is_some_and(|(began, d)| began.elapsed() > d) {
            serve.on(stage, Cause::Deadline, "the drain's deadline");
            continue;
        }
        let before = serve.state;
        let wait = match stage.tick(&mut serve)? {
            Tick::Exit(code) => return Ok(code),
            Tick::Busy(wait) => wait,
            Tick::Idle(wait) => {
                serve.on(stage, Cause::Idle, "idle");
                wait
            }
        };
        // A drain (or stop) heard while the tick served its inbox (a long
        // poll): the wait it asked for was decided before; tick again now.
        if serve.state != before {
            continue;
        }
        if !serve.stopping() {
            serve.serve(stage, wait);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    /// Every cell, row by row: a change to the policy is a change here.
    #[test]
    fn the_policy_row_by_row() {
        use Action::*;
        use Cause::*;
        let causes = [Term, Quit, DrainCommand, Asked, Idle, Deadline];
        let row = |s| causes.map(|c| action(s, c));
        // Running: a stop or a drain asked for drains; QUIT stops at once;
        // holding nothing, or a deadline, is nothing to a running stage.
        assert_eq!(row(State::Running), [Drain, Stop, Drain, Drain, Stay, Stay]);
        // Draining: the second TERM or INT, or QUIT, stops at once; a drain
        // asked again is the same drain; nothing held, or the deadline, ends it.
        assert_eq!(row(State::Draining), [Stop, Stop, Stay, Stay, Exit, Exit]);
        // Stopping: nothing changes a stop.
        assert_eq!(row(State::Stopping), [Stay; CAUSES]);
    }

    /// A stage that records what the loop told it.
    #[derive(Default)]
    struct Probe {
        said: Vec<String>,
        /// Passes left before it holds nothing.
        busy: usize,
        /// Ticks seen in each state.
        ticks: Vec<State>,
        deadline: Option<Duration>,
    }

    impl Stage for Probe {
        const DRAIN_COMMAND: bool = true;
        fn tick(&mut self, serve: &mut Serve) -> Result<Tick, Failure> {
            self.ticks.push(serve.state());
            if serve.draining() && self.busy == 0 {
                return Ok(Tick::Idle(Duration::from_millis(10)));
            }
            self.busy = self.busy.saturating_sub(1);
            Ok(Tick::Busy(Duration::from_millis(10)))
        }
        fn status(&self, state: State) -> Value {
            json!({"state": format!("{state:?}")})
        }
        fn drain(&mut self, why: &str) {
            self.said.push(format!("drain: {why}"));
        }
        fn stop(&mut self, why: &str) -> ExitCode {
            self.said.push(format!("stop: {why}"));
            ExitCode::Failure
        }
        fn finished(&mut self) -> ExitCode {
            self.said.push("finished".into());
            ExitCode::Ok
        }
        fn deadline(&self) -> Option<Duration> {
            self.deadline
        }
    }

    /// Runs `probe` with `events` queued; a run that does not end within
    /// 10 s fails the test (a stop the policy lost), rather than hanging it.
    fn run_with(mut probe: Probe, events: Vec<Event>) -> (Probe, ExitCode) {
        let (done_tx, done) = mpsc::channel();
        std::thread::spawn(move || {
            let inbox = Inbox::new();
            for e in events {
                inbox.tx.send(e).unwrap();
            }
            let code = run(&mut probe, inbox).unwrap();
            let _ = done_tx.send((probe, code));
        });
        done.recv_timeout(Duration::from_secs(10)).expect("the run did not end within 10 s")
    }

    #[test]
    fn a_first_term_drains_until_nothing_is_held() {
        let (p, code) = run_with(Probe { busy: 3, ..Probe::default() }, vec![Event::Signal(libc::SIGTERM)]);
        assert_eq!(code, ExitCode::Ok);
        assert_eq!(p.said, ["drain: SIGTERM", "finished"]);
        assert!(p.ticks.iter().filter(|s| **s == State::Draining).count() >= 3, "{:?}", p.ticks);
    }

    #[test]
    fn a_second_term_stops_at_once_however_much_is_held() {
        let events = vec![Event::Signal(libc::SIGINT), Event::Signal(libc::SIGTERM)];
        let (p, code) = run_with(Probe { busy: usize::MAX, ..Probe::default() }, events);
        assert_eq!(code, ExitCode::Failure);
        assert_eq!(p.said, ["drain: SIGINT", "stop: second SIGTERM"]);
    }

    #[test]
    fn quit_stops_at_once_and_a_drain_command_is_a_first_stop() {
        let (p, _) = run_with(Probe { busy: usize::MAX, ..Probe::default() }, vec![Event::Signal(libc::SIGQUIT)]);
        assert_eq!(p.said, ["stop: SIGQUIT"]);
        let (reply, answer) = mpsc::channel();
        let drain = Event::Command { cmd: "drain".into(), body: Value::Null, reply };
        let (p, _) =
            run_with(Probe { busy: usize::MAX, ..Probe::default() }, vec![drain, Event::Signal(libc::SIGTERM)]);
        assert_eq!(answer.recv().unwrap(), json!({"ok": true, "draining": true}));
        assert_eq!(p.said, ["drain: drain command", "stop: second SIGTERM"]);
    }

    /// A stage that hears TERM while it serves its inbox within its first
    /// tick (as claimd in a long poll), and asks then for a long wait.
    struct Poller {
        ticks: usize,
    }

    impl Stage for Poller {
        fn tick(&mut self, serve: &mut Serve) -> Result<Tick, Failure> {
            self.ticks += 1;
            if self.ticks == 1 {
                serve.serve(self, Duration::ZERO);
                return Ok(Tick::Busy(Duration::from_secs(60)));
            }
            Ok(if serve.draining() { Tick::Idle(Duration::ZERO) } else { Tick::Busy(Duration::from_secs(60)) })
        }
        fn status(&self, _: State) -> Value {
            Value::Null
        }
    }

    #[test]
    fn a_drain_heard_within_a_tick_is_acted_on_at_once_not_after_its_wait() {
        let (done_tx, done) = mpsc::channel();
        std::thread::spawn(move || {
            let inbox = Inbox::new();
            inbox.tx.send(Event::Signal(libc::SIGTERM)).unwrap();
            let mut poller = Poller { ticks: 0 };
            let _ = done_tx.send((run(&mut poller, inbox).unwrap(), poller.ticks));
        });
        let ended = done.recv_timeout(Duration::from_secs(10));
        assert_eq!(ended, Ok((ExitCode::Ok, 2)), "the drain waited for the tick's 60 s");
    }

    #[test]
    fn a_command_no_stage_takes_is_answered_unknown_by_the_loop() {
        let inbox = Inbox::new();
        let mut serve = Serve::new(Inbox { tx: inbox.tx.clone(), rx: inbox.rx });
        let ask = |cmd: &str| {
            let (reply, answer) = mpsc::channel();
            inbox.tx.send(Event::Command { cmd: cmd.into(), body: Value::Null, reply }).unwrap();
            answer
        };
        // A stage that `drain` does not drain (every stage but runnerd).
        let (frob, drain) = (ask("frobnicate"), ask("drain"));
        assert!(serve.serve(&mut Poller { ticks: 0 }, Duration::ZERO));
        assert_eq!(frob.recv().unwrap(), json!({"error": "unknown command \"frobnicate\""}));
        assert_eq!(drain.recv().unwrap(), json!({"error": "unknown command \"drain\""}));
        assert_eq!(serve.state(), State::Running);
    }

    #[test]
    fn a_drain_past_its_deadline_ends_with_work_held() {
        let probe = Probe { busy: usize::MAX, deadline: Some(Duration::from_millis(50)), ..Probe::default() };
        let (p, code) = run_with(probe, vec![Event::Signal(libc::SIGTERM)]);
        assert_eq!(
            (code, p.said.as_slice()),
            (ExitCode::Ok, ["drain: SIGTERM".to_string(), "finished".into()].as_slice())
        );
    }

    #[test]
    fn status_is_answered_with_the_state_and_threads_watch_it() {
        let inbox = Inbox::new();
        let mut serve = Serve::new(Inbox { tx: inbox.tx.clone(), rx: inbox.rx });
        let mut probe = Probe::default();
        let watch = serve.watch();
        inbox.tx.send(Event::Signal(libc::SIGTERM)).unwrap();
        let (reply, answer) = mpsc::channel();
        inbox.tx.send(Event::Command { cmd: "status".into(), body: Value::Null, reply }).unwrap();
        assert!(serve.serve(&mut probe, Duration::ZERO), "a first TERM does not stop");
        assert_eq!(answer.recv().unwrap(), json!({"state": "Draining"}));
        assert!(!watch.running() && watch.sleep(Duration::from_secs(10)), "a thread sees the drain at once");
        inbox.tx.send(Event::Signal(libc::SIGQUIT)).unwrap();
        assert!(!serve.serve(&mut probe, Duration::ZERO), "the caller abandons what it waits on");
        assert_eq!(watch.state(), State::Stopping);
        assert!(watch.drain_begun(), "a stop after a drain: the drain began all the same");
        // QUIT alone: a thread's sleep is not cut short, and nothing is handed back.
        let inbox = Inbox::new();
        let mut serve = Serve::new(Inbox { tx: inbox.tx.clone(), rx: inbox.rx });
        let watch = serve.watch();
        inbox.tx.send(Event::Signal(libc::SIGQUIT)).unwrap();
        assert!(!serve.serve(&mut probe, Duration::ZERO));
        assert_eq!((watch.state(), watch.drain_begun()), (State::Stopping, false));
        assert!(!watch.sleep(Duration::from_millis(50)), "QUIT cut a thread's sleep short");
    }
}
