//! Signals as messages, and the shutdown a stage is handed. A stage's
//! `run` takes a [`Shutdown`]: the inbox its main loop waits on (wake-ups,
//! control commands, signals alike) and the count of stop requests. Its
//! caller keeps the other end, a [`Stopper`]: a program's `main` gives it
//! to [`forward`], whose thread turns each signal into an event (no work in
//! a signal handler); a test calls [`Stopper::stop`] instead, in-process.
//! The libraries never install a handler: only `bins/*/src/main.rs` calls
//! [`forward`] (or [`forwarded`]).

use crate::control::{Event, Inbox};
use crate::exit::ExitCode;
use crate::failure::Failure;
use signal_hook::consts::{SIGCHLD, SIGCONT, SIGHUP, SIGINT, SIGQUIT, SIGTERM};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::Sender;
use std::sync::Arc;

/// The signals every stage listens to. CONT is taken (and ignored) because
/// supervisors send TERM then CONT; CHLD only matters to `runnerd`.
pub const HANDLED: [i32; 6] = [SIGTERM, SIGINT, SIGQUIT, SIGHUP, SIGCONT, SIGCHLD];

/// Counts stop requests (TERM and INT) as they arrive, for loops that
/// cannot wait on the inbox (a prep in progress, a retry sleep).
#[derive(Clone, Default)]
pub struct Stops(Arc<AtomicUsize>);

impl Stops {
    pub fn count(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }

    pub fn requested(&self) -> bool {
        self.count() > 0
    }

    /// Counts a stop that did not come by signal (a control command).
    pub fn request(&self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }

    /// Sleeps `d`, or less if a stop arrives; true if it did.
    pub fn sleep(&self, d: std::time::Duration) -> bool {
        let end = crate::clock::deadline(d);
        let before = self.count();
        while std::time::Instant::now() < end {
            if self.count() != before || self.requested() {
                return true;
            }
            std::thread::sleep((end - std::time::Instant::now()).min(std::time::Duration::from_millis(20)));
        }
        self.requested()
    }
}

/// What ends a stage's run, handed to it by its caller: the inbox its main
/// loop waits on, and the stop requests counted so far. The control socket
/// feeds the same inbox (through `inbox.tx`).
pub struct Shutdown {
    pub inbox: Inbox,
    pub stops: Stops,
}

/// The caller's end of a [`Shutdown`]: delivers signals, real or not.
#[derive(Clone)]
pub struct Stopper {
    tx: Sender<Event>,
    stops: Stops,
}

impl Shutdown {
    /// A shutdown and the stopper that triggers it.
    pub fn new() -> (Shutdown, Stopper) {
        let inbox = Inbox::new();
        let stops = Stops::default();
        let stopper = Stopper { tx: inbox.tx.clone(), stops: stops.clone() };
        (Shutdown { inbox, stops }, stopper)
    }
}

impl Stopper {
    /// Delivers `sig` as the stage takes a signal: TERM and INT are counted
    /// first (loops that cannot wait on the inbox read the count), then the
    /// event is queued. False once the stage's inbox is gone.
    pub fn signal(&self, sig: i32) -> bool {
        if sig == SIGTERM || sig == SIGINT {
            self.stops.request();
        }
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
