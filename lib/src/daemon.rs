//! What every stage does to start and to end: open the spool, listen to
//! signals and to its control socket (one inbox for both), and turn a
//! failure into its exit code with one log line.

use crate::config::ConfigError;
use crate::control::{self, Inbox};
use crate::signals::{self, Stops};
use crate::spool::Spool;
use ojrunner_daemon::ExitCode;
use std::path::Path;
use std::sync::mpsc::RecvTimeoutError;
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub use ojrunner_daemon::{exit_code, Failure};

impl From<ConfigError> for Failure {
    fn from(e: ConfigError) -> Failure {
        Failure(ExitCode::Config, e.0)
    }
}

impl From<crate::spool::SpoolError> for Failure {
    fn from(e: crate::spool::SpoolError) -> Failure {
        Failure(ExitCode::Temporary, e.0)
    }
}

/// A running stage's plumbing.
pub struct Daemon {
    pub spool: Spool,
    pub inbox: Inbox,
    pub stops: Stops,
}

impl Daemon {
    /// Opens the spool in `dir` and listens as `stage`.
    pub fn start(stage: &str, dir: &Path) -> Result<Daemon, Failure> {
        let spool = Spool::open(dir)?;
        let inbox = Inbox::new();
        let stops =
            signals::forward(inbox.tx.clone()).map_err(|e| Failure(ExitCode::Temporary, format!("signals: {e}")))?;
        control::listen(dir, stage, inbox.tx.clone())
            .map_err(|e| Failure(ExitCode::Temporary, format!("control socket: {e}")))?;
        Ok(Daemon { spool, inbox, stops })
    }
}

/// How often a stage waiting on the hub looks at its inbox.
pub const SERVE_EVERY: Duration = Duration::from_millis(50);

/// Runs `ask` (a request to the hub, which may take its whole timeout) on
/// a thread of its own, calling `meanwhile` about every [`SERVE_EVERY`]
/// until it is done: the stage answers its control socket and hears its
/// signals while the hub takes its time. `meanwhile` returning false
/// abandons the request (`None`): the stage stops at once, and the thread
/// ends with the process. What the request changed at the hub is the
/// protocol's business (an outcome sent again is a duplicate there).
pub fn serving<T: Send + 'static>(
    ask: impl FnOnce() -> T + Send + 'static,
    mut meanwhile: impl FnMut() -> bool,
) -> Option<T> {
    let (tx, rx) = std::sync::mpsc::channel();
    // Shared, so that a thread that cannot start leaves `ask` to us.
    let ask = Arc::new(Mutex::new(Some(ask)));
    let theirs = ask.clone();
    let started = std::thread::Builder::new().name("hub-request".into()).spawn(move || {
        let ask = theirs.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(ask) = ask {
            let _ = tx.send(ask());
        }
    });
    let thread = match started {
        Ok(t) => t,
        Err(e) => {
            log::warn!("cannot start a thread for a request to the hub ({e}); the control socket waits for it");
            let ask = ask.lock().unwrap_or_else(|e| e.into_inner()).take();
            return Some(ask.expect("the request's thread never started")());
        }
    };
    loop {
        match rx.recv_timeout(SERVE_EVERY) {
            Ok(answer) => return Some(answer),
            Err(RecvTimeoutError::Timeout) => {
                if !meanwhile() {
                    return None;
                }
            }
            // The request panicked: so does the stage, with its message.
            Err(RecvTimeoutError::Disconnected) => match thread.join() {
                Err(panic) => std::panic::resume_unwind(panic),
                Ok(()) => panic!("a request to the hub ended without an answer"),
            },
        }
    }
}

/// The language table: `path`, or the built-in copy of etc/languages.json.
pub fn languages(path: Option<&Path>) -> Result<crate::language::Languages, Failure> {
    match path {
        Some(p) => crate::language::Languages::load(p)
            .map_err(|e| Failure(ExitCode::Config, format!("languages {}: {e}", p.display()))),
        None => Ok(crate::language::Languages::builtin()),
    }
}
