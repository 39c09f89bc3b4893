//! Signals as messages, and the shutdown a stage is handed. A stage's
//! `run` takes a [`Shutdown`]: the inbox its main loop waits on (wake-ups,
//! control commands, signals alike); what a signal does to the run is the
//! loop's policy ([`crate::stage::POLICY`]), not counted here. Its
//! caller keeps the other end, a [`Stopper`]: a program's `main` gives it
//! to [`forward`], whose thread turns each signal into an event (no work in
//! a signal handler); a test calls [`Stopper::stop`] instead, in-process.
//! The libraries never install a handler: only `bins/*/src/main.rs` calls
//! [`forward`] (or [`forwarded`]).

use crate::control::{Event, Inbox};
use crate::exit::ExitCode;
use crate::failure::Failure;
use signal_hook::consts::{SIGCHLD, SIGCONT, SIGHUP, SIGINT, SIGQUIT, SIGTERM};
use std::sync::mpsc::Sender;

/// The signals every stage listens to. CONT is taken (and ignored) because
/// supervisors send TERM then CONT; CHLD only matters to `runnerd`.
pub const HANDLED: [i32; 6] = [SIGTERM, SIGINT, SIGQUIT, SIGHUP, SIGCONT, SIGCHLD];

/// What ends a stage's run, handed to it by its caller: the inbox its main
/// loop waits on. The control socket feeds the same inbox (through
/// `inbox.tx`).
pub struct Shutdown {
    pub inbox: Inbox,
}

/// The caller's end of a [`Shutdown`]: delivers signals, real or not.
#[derive(Clone)]
pub struct Stopper {
    tx: Sender<Event>,
}

impl Shutdown {
    /// A shutdown and the stopper that triggers it.
    pub fn new() -> (Shutdown, Stopper) {
        let inbox = Inbox::new();
        let stopper = Stopper { tx: inbox.tx.clone() };
        (Shutdown { inbox }, stopper)
    }
}

impl Stopper {
    /// Delivers `sig` as the stage takes a signal: queued as an event for
    /// its loop. False once the stage's inbox is gone.
    pub fn signal(&self, sig: i32) -> bool {
        self.tx.send(Event::Signal(sig)).is_ok()
    }

    /// What a first TERM does: the stage finishes what it holds and stops
    /// (a second one stops it at once).
    pub fn stop(&self) -> bool {
        self.signal(SIGTERM)
    }
}

/// Forwards [`HANDLED`] signals to `stopper` from a background thread.
pub fn forward(stopper: Stopper) -> std::io::Result<()> {
    let mut signals = signal_hook::iterator::Signals::new(HANDLED)?;
    std::thread::Builder::new().name("signals".into()).spawn(move || {
        for sig in signals.forever() {
            if !stopper.signal(sig) {
                break;
            }
        }
    })?;
    Ok(())
}

/// A [`Shutdown`] that the process's signals trigger ([`forward`]): what
/// a program's `main` hands its stage.
pub fn forwarded() -> Result<Shutdown, Failure> {
    let (shutdown, stopper) = Shutdown::new();
    forward(stopper).map_err(|e| Failure(ExitCode::Temporary, format!("signals: {e}")))?;
    Ok(shutdown)
}

/// Runs a stage with a [`Shutdown`] the process's signals trigger
/// ([`forwarded`]), and gives its exit code ([`crate::exit_code`], which
/// logs why it failed): how a program's `main` runs its stage.
pub fn run_stage(stage: impl FnOnce(Shutdown) -> Result<ExitCode, Failure>) -> ExitCode {
    crate::exit_code(forwarded().and_then(stage))
}

/// A signal's name, for logs.
pub fn name(sig: i32) -> String {
    nix::sys::signal::Signal::try_from(sig).map(|s| s.as_str().to_string()).unwrap_or_else(|_| format!("signal {sig}"))
}

/// Restores the default SIGPIPE for commands that print to stdout, as any
/// Unix filter: `runnerd status | head -n 1` ends quietly instead of
/// panicking on a closed pipe.
pub fn default_sigpipe() {
    ojrunner_unix::default_sigpipe();
}
