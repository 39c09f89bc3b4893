//! What every stage does to start: open the spool and listen on its
//! control socket, feeding the inbox of the [`Shutdown`] its caller handed
//! it (signals come through the same inbox, forwarded by the program's
//! `main`; this library installs no handler).

use crate::config::ConfigError;
use crate::control::{self, Inbox};
use crate::signals::Shutdown;
use crate::spool::{FileId, Spool, SpoolError};
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

/// A spool error that ends a stage, by its policy
/// ([`SpoolError::retry`]): the spool gone, the stage stops (exit 100,
/// [`spool_gone`]): restarted, it would find no spool or another one.
/// Anything else is temporary (exit 111), the spool's pages say: a
/// restarted stage tries again.
impl From<SpoolError> for Failure {
    fn from(e: SpoolError) -> Failure {
        match e {
            SpoolError::Gone(why) => spool_gone(why),
            e => Failure(ExitCode::Temporary, e.to_string()),
        }
    }
}

/// The variable in which `runnerd` tells its stages which file the spool
/// it made is ([`FileId`], `dev:ino`).
pub const SPOOL_ID_ENV: &str = "OJ_SPOOL_ID";

/// What a stage whose spool is gone returns: exit 100, not restarted (a
/// restart would find no spool, or another one).
pub fn spool_gone(why: String) -> Failure {
    Failure(ExitCode::Config, format!("{why}: stopping; the runner must be started again on a spool"))
}

/// A running stage's plumbing: its spool, and the inbox its loop
/// ([`ojrunner_daemon::stage::run`]) serves.
pub struct Daemon {
    pub spool: Spool,
    pub inbox: Inbox,
}

impl Daemon {
    /// Opens the spool in `dir` and listens as `stage`, into the inbox of
    /// `shutdown`. Under `runnerd` (`OJ_SPOOL_ID` set) the spool must be
    /// the very file runnerd made, else this exits 100: a stage never makes
    /// a new spool under a running runner. A stage started alone makes it
    /// if it is not there.
    pub fn start(stage: &str, dir: &Path, shutdown: Shutdown) -> Result<Daemon, Failure> {
        crate::config::name_normal_oj_leftovers(dir);
        let spool = match std::env::var(SPOOL_ID_ENV) {
            Ok(id) => {
                let id = FileId::parse(&id)
                    .ok_or_else(|| Failure(ExitCode::Config, format!("{SPOOL_ID_ENV}={id:?} is not dev:ino")))?;
                // Not the spool runnerd made, whatever the reason: stop.
                Spool::open_as(dir, id).map_err(|e| Failure(ExitCode::Config, e.to_string()))?
            }
            Err(_) => Spool::create(dir)?,
        };
        let Shutdown { inbox } = shutdown;
        control::listen(dir, stage, inbox.tx.clone())
            .map_err(|e| Failure(ExitCode::Temporary, format!("control socket: {e}")))?;
        Ok(Daemon { spool, inbox })
    }
}

/// The whole `main` of a stage whose command line is the common options
/// alone (leased, reportd): the process set up as every program's is
/// ([`ojrunner_daemon::start`]), `run` called with its signals forwarded
/// into its inbox, and the process ended with its exit code.
pub fn common_stage_main(
    name: &'static str,
    about: &'static str,
    run: fn(&crate::config::Common, Shutdown) -> Result<ExitCode, Failure>,
) -> ! {
    use clap::{Args, Command, FromArgMatches};
    let common = ojrunner_daemon::start(name, || {
        // The options' own doc would be the program's about: set after.
        let cli = crate::config::Common::augment_args(Command::new(name));
        let cli = cli.version(env!("CARGO_PKG_VERSION")).about(about);
        crate::config::Common::from_arg_matches(&cli.get_matches()).unwrap_or_else(|e| e.exit())
    });
    std::process::exit(ojrunner_daemon::signals::run_stage(|shutdown| run(&common, shutdown)).code())
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
    crate::language::Languages::load_or_builtin(path).map_err(|why| Failure(ExitCode::Config, why))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Common;
    use crate::signals::Shutdown;
    use clap::Parser;
    use ojrunner_daemon::ExitCode;
    use std::sync::mpsc;

    #[derive(Parser)]
    struct Told {
        #[command(flatten)]
        common: Common,
    }

    type Run = fn(&Common, Shutdown) -> Result<ExitCode, Failure>;

    /// Whether SIGTERM still has its default disposition in this process.
    fn term_is_default() -> bool {
        // SAFETY: a null new action only reads the current one.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            libc::sigaction(libc::SIGTERM, std::ptr::null(), &mut old) == 0 && old.sa_sigaction == libc::SIG_DFL
        }
    }

    /// `stage` started by `run` in a thread of its own on the spool `dir`,
    /// against a hub address nothing answers, once its control socket
    /// answers: how to stop it, and where its end is told.
    fn started(
        stage: &str,
        run: Run,
        dir: &std::path::Path,
    ) -> (ojrunner_daemon::signals::Stopper, mpsc::Receiver<Result<ExitCode, String>>) {
        let spool = dir.to_str().unwrap();
        let told = Told::try_parse_from(["t", "--backend-url", "http://127.0.0.1:9", "--spool", spool]).unwrap();
        let (shutdown, stopper) = Shutdown::new();
        let (done_tx, done) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = done_tx.send(run(&told.common, shutdown).map_err(|f| f.to_string()));
        });
        let begun = std::time::Instant::now();
        while !control::answers(dir, stage) {
            assert!(begun.elapsed() < Duration::from_secs(10), "{stage}: its control socket never answered");
            std::thread::sleep(Duration::from_millis(20));
        }
        (stopper, done)
    }

    /// A stage runs in-process on a spool of its own until its caller stops
    /// it through the `Shutdown` it was handed: no signal is sent, and the
    /// stage installs no handler (TERM keeps its default). A stage that
    /// ignored its shutdown would still run.
    #[test]
    fn a_stage_stops_through_its_shutdown_argument() {
        let stages: [(&str, Run); 2] = [("reportd", crate::stage::reportd::run), ("leased", crate::stage::leased::run)];
        for (stage, run) in stages {
            let dir = ojrunner_daemon::test_dir(&format!("ojstop-{stage}"));
            // An address nothing answers: with no identity, neither stage asks the hub.
            let (stopper, done) = started(stage, run, &dir);
            assert!(done.recv_timeout(Duration::from_millis(300)).is_err(), "{stage} ended before it was stopped");
            assert!(term_is_default(), "{stage}: the library installed a TERM handler; only a program's main may");
            assert!(stopper.stop(), "{stage}: its inbox is gone before it was stopped");
            let ended = done.recv_timeout(Duration::from_secs(10));
            assert_eq!(ended, Ok(Ok(ExitCode::Ok)), "{stage}: not stopped by its shutdown within 10 s");
            let _ = std::fs::remove_dir_all(&dir);
        }
    }

    /// The first TERM drains, the second stops at once, in each stage that
    /// holds work it cannot finish (an outcome queued, a job's lease, for a
    /// hub that refuses every connection): after the first it runs on and
    /// says so where it can; the second ends it at once, exit 0. A stage
    /// that counted the first TERM as nothing, or whose second did not
    /// stop it, fails here.
    #[test]
    fn a_first_term_keeps_what_is_held_and_a_second_stops_at_once() {
        use crate::protocol::{AbortReason, Registration, RunnerConfig};
        let stages: [(&str, Run); 2] = [("reportd", crate::stage::reportd::run), ("leased", crate::stage::leased::run)];
        for (stage, run) in stages {
            let dir = ojrunner_daemon::test_dir(&format!("ojsecond-{stage}"));
            let mut spool = Spool::create(&dir).unwrap();
            let me = Registration { runner_id: "rn_t".into(), token: "tk".into(), config: RunnerConfig::default() };
            spool.set_identity(&me).unwrap();
            let (claim, _) = spool.insert_claim("rn_t", "jb_t", "{}").unwrap();
            // reportd holds an outcome to deliver; leased, a job to keep.
            if stage == "reportd" {
                assert!(spool.abort(claim, AbortReason::Drain, "a test").unwrap());
            }
            drop(spool);
            let (stopper, done) = started(stage, run, &dir);
            let started = std::time::Instant::now();
            assert!(stopper.stop(), "{stage}: its inbox is gone before the first TERM");
            if stage == "leased" {
                let status =
                    || control::request(&dir, stage, &serde_json::json!({"cmd": "status"}), Duration::from_secs(3));
                while !status().is_ok_and(|s| s["stopping"] == true) {
                    assert!(started.elapsed() < Duration::from_secs(10), "{stage}: never said it is stopping");
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
            assert!(done.recv_timeout(Duration::from_millis(500)).is_err(), "{stage}: the first TERM stopped it");
            assert!(stopper.stop(), "{stage}: its inbox is gone before the second TERM");
            let ended = done.recv_timeout(Duration::from_secs(10));
            assert_eq!(ended, Ok(Ok(ExitCode::Ok)), "{stage}: a second TERM did not stop it at once");
            let _ = std::fs::remove_dir_all(&dir);
        }
    }

    /// claimd, paused between registrations with a hub that does not
    /// answer, stops at once on SIGQUIT by returning from `run`: it used to
    /// end the whole process, so no test could drive it in-process.
    #[test]
    fn claimd_stops_at_once_on_sigquit_by_returning() {
        // A library that ends the process (exit 0 mid-test) would pass
        // unseen: while this test runs, an exit fails the test binary.
        static RUNNING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
        extern "C" fn refuse_exit() {
            if RUNNING.load(std::sync::atomic::Ordering::SeqCst) {
                eprintln!("claimd ended the whole process instead of returning from run");
                // SAFETY: _exit takes no pointer; ending the test binary here, flushing nothing, is the point.
                unsafe { libc::_exit(70) };
            }
        }
        RUNNING.store(true, std::sync::atomic::Ordering::SeqCst);
        // SAFETY: refuse_exit is a plain extern fn of this binary, alive until the process ends.
        unsafe { libc::atexit(refuse_exit) };
        let dir = std::env::temp_dir().join(format!("ojstop-{}-claimd", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let spool = dir.to_str().unwrap();
        let args = ["t", "--backend-url", "http://127.0.0.1:9", "--registration-token", "t", "--spool", spool];
        let told = Told::try_parse_from(args).unwrap();
        let config = crate::stage::claimd::Config { common: told.common, claim_wait: "1".into(), languages: None };
        let (shutdown, stopper) = Shutdown::new();
        let (done_tx, done) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = done_tx.send(crate::stage::claimd::run(config, shutdown).map_err(|f| f.to_string()));
        });
        let started = std::time::Instant::now();
        while !control::answers(&dir, "claimd") {
            assert!(started.elapsed() < Duration::from_secs(10), "claimd: its control socket never answered");
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(stopper.signal(libc::SIGQUIT), "claimd: its inbox is gone before SIGQUIT");
        assert_eq!(done.recv_timeout(Duration::from_secs(10)), Ok(Ok(())), "claimd: not stopped by SIGQUIT");
        RUNNING.store(false, std::sync::atomic::Ordering::SeqCst);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
