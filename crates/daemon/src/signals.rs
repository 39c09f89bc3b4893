//! Signals as messages: a thread turns each signal into an [`Event`] on the
//! stage's inbox, so a main loop waits on one channel for wake-ups, control
//! commands and signals alike, and never does work in a signal handler.

use crate::control::Event;
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
        let end = std::time::Instant::now() + d;
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

/// Forwards [`HANDLED`] signals to `tx` from a background thread; returns
/// the stop counter it keeps.
pub fn forward(tx: Sender<Event>) -> std::io::Result<Stops> {
    let stops = Stops::default();
    let mut signals = signal_hook::iterator::Signals::new(HANDLED)?;
    let s = stops.clone();
    std::thread::Builder::new().name("signals".into()).spawn(move || {
        for sig in signals.forever() {
            if sig == SIGTERM || sig == SIGINT {
                s.0.fetch_add(1, Ordering::SeqCst);
            }
            if tx.send(Event::Signal(sig)).is_err() {
                break;
            }
        }
    })?;
    Ok(stops)
}

/// A signal's name, for logs.
pub fn name(sig: i32) -> String {
    nix::sys::signal::Signal::try_from(sig).map(|s| s.as_str().to_string()).unwrap_or_else(|_| format!("signal {sig}"))
}

/// Restores the default SIGPIPE for commands that print to stdout, as any
/// Unix filter: `runnerd status | head -n 1` ends quietly instead of
/// panicking on a closed pipe.
pub fn default_sigpipe() {
    // SAFETY: setting a signal's disposition to its default is always sound.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
