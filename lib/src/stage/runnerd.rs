//! `runnerd`: the runner's small supervisor. It starts the four stages,
//! restarts one that dies (with backoff), and on the first TERM or INT
//! drains them in order:
//!
//! 1. latch: set the spool's drain flag; from now on no claim starts;
//! 2. `claimd` (TERM): claims nothing more; a claim request in flight is read
//!    to the end; claims not started go back as `abort(drain)` (a capped
//!    share of the deadline; past it `claimd` is killed and `runnerd` hands
//!    the claims back itself);
//! 3. `judge-exec` (TERM): judges every remaining case of the claims in
//!    flight, starts none, and exits when idle;
//! 4. scan again: anything dispatched late goes back as `abort(drain)`;
//! 5. `reportd` (TERM): delivers everything queued, exits when the outbox is
//!    empty;
//! 6. `leased` (TERM) last: leases stay renewed until the final sends.
//!
//! The order, each step's share of the deadline and when it is done are one
//! table, [`crate::drain`]. One deadline (`DRAIN_TIMEOUT_SEC`) spans every step, and the in-flight
//! wait leaves a reserve for reporting. Past it, what is left is logged and
//! left to lease expiry, and `runnerd` exits 1. A second TERM or INT, or a
//! QUIT, kills every stage at once (exit 1). When each of these happens is
//! the stop policy of the loop runnerd runs in, as every stage does
//! ([`ojrunner_daemon::stage::POLICY`]); the walk of the drain is
//! runnerd's own (its `Drain`). A stage that dies during a
//! drain before its step is done is started again, so a crash never strands
//! a job.

use crate::config::{self, Common};
use crate::control::{self, Event, Inbox};
use crate::counter::{labels, Counter};
use crate::drain::{self, Step};
use crate::patience;
use crate::signals::Shutdown;
use crate::spool::{ClaimState, Spool};
use log::{error, info, warn};
use ojrunner_daemon::stage::{self, Serve, State, Tick};
use ojrunner_daemon::{ExitCode, Failure};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// The stages, in start order ([`drain::START_ORDER`]): the order in which
/// runnerd starts its stages, passes signals on to them, and lists them in
/// its status.
pub const STAGES: [&str; drain::ORDER.len()] = drain::START_ORDER;

/// What the supervisor is told (its command line, and the commands that
/// talk to a running one, are `bins/runnerd`'s).
#[derive(Clone, Debug)]
pub struct Config {
    pub common: Common,
    /// Where the stage programs are (default: [`stages_beside`] runnerd,
    /// else PATH).
    pub libexec: Option<PathBuf>,
    /// Where to serve `GET /metrics` (`HOST:PORT`), if anywhere.
    pub metrics_listen: Option<String>,
}

/// Where the stages are, given runnerd's own path `exe`: its directory (a
/// build tree, or every program in one directory), else
/// `../libexec/ojrunner` from it (where `make install` puts them, runnerd
/// being in sbin); the first that holds `claimd`. None: look them up in PATH.
pub fn stages_beside(exe: &Path) -> Option<PathBuf> {
    let dir = exe.parent()?;
    let installed = dir.parent().map(|p| p.join("libexec/ojrunner"));
    std::iter::once(dir.to_path_buf()).chain(installed).find(|d| d.join("claimd").exists())
}

/// Runs the runner: starts the stages and supervises them until `shutdown`
/// drains them (or a stage's exit stops the runner).
pub fn run(cfg: &Config, shutdown: Shutdown) -> Result<ExitCode, Failure> {
    let (mut supervisor, inbox) = Supervisor::new(cfg, shutdown)?;
    info!("starting {}", STAGES.join(", "));
    stage::run(&mut supervisor, inbox)
}

/// One supervised stage.
struct Stage {
    name: &'static str,
    child: Option<Child>,
    started: Instant,
    /// Times started by this runnerd: every start after the first is a
    /// restart (`ojrunner_stage_restarts_total`).
    starts: u32,
    quick_failures: u32,
    next_start: Option<Instant>,
    /// Told to stop (TERM sent) in this drain step.
    told: bool,
    last_exit: Option<i32>,
}

struct Supervisor {
    spool: Spool,
    libexec: Option<PathBuf>,
    /// What runnerd was told, passed on to every stage as its environment.
    env: Vec<(&'static str, String)>,
    stages: Vec<Stage>,
    notify_fd: Option<i32>,
    ready: bool,
    drain_total: Duration,
    drain: Drain,
}

/// Where runnerd's walk of the drain table ([`drain::ORDER`]) is.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Drain {
    /// Not begun: supervising.
    Off,
    /// At `step`, since `step_begun`; the drain began at `begun`, and
    /// systemd was last told it is progress at `extended`.
    On { step: Step, begun: Instant, step_begun: Instant, extended: Option<Instant>, ending: Ending },
    /// Over: the exit code.
    Over(ExitCode),
}

/// How a drain in progress will end, as far as it is known.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Ending {
    /// Every step done: exit 0.
    Clean,
    /// A step was cut by the deadline: exit 1.
    Cut,
    /// The runner must not run again as it is configured (claimd exited
    /// 100, `why`): exit 100, whether `cut` or not.
    Misconfigured { why: String, cut: bool },
}

impl Ending {
    /// A step was cut by the deadline.
    fn cut(self) -> Ending {
        match self {
            Ending::Clean | Ending::Cut => Ending::Cut,
            Ending::Misconfigured { why, .. } => Ending::Misconfigured { why, cut: true },
        }
    }

    /// claimd found the configuration wrong.
    fn misconfigured(self, why: String) -> Ending {
        Ending::Misconfigured { why, cut: matches!(self, Ending::Cut | Ending::Misconfigured { cut: true, .. }) }
    }
}

/// How long the stages of a runner whose spool is gone have to stop on
/// their own (leased hands back what the runner holds) before they are
/// killed.
const GONE_GRACE: Duration = Duration::from_secs(15);

impl Supervisor {
    fn new(cfg: &Config, shutdown: Shutdown) -> Result<(Supervisor, Inbox), Failure> {
        let c = &cfg.common;
        config::name_normal_oj_leftovers(&c.spool);
        // Checked here so a bad configuration stops the runner once, not
        // each stage in a restart loop.
        c.backend_url().map_err(|e| Failure(ExitCode::Config, e.0))?;
        c.registration_token().map_err(|e| Failure(ExitCode::Config, e.0))?;
        let drain_total = c.drain_timeout().map_err(|e| Failure(ExitCode::Config, e.0))?;
        // What judge-exec will judge (its table: OJ_LANGUAGES, passed on),
        // said once here; a table it cannot read, judge-exec refuses.
        let table = std::env::var_os("OJ_LANGUAGES").map(std::path::PathBuf::from);
        if let Ok(languages) = crate::daemon::languages(table.as_deref()) {
            crate::language::log_toolchains(&languages);
        }
        // Its stages are born where it is: on v2, in the leaf of the cgroup
        // it was started in, which must be its own (delegated).
        crate::sandbox::place_cgroups().map_err(|e| Failure(ExitCode::Config, e.to_string()))?;
        // The socket first: nothing is written before this runnerd knows it
        // is the only one on the spool (a second one must not lift the
        // first one's drain latch).
        std::fs::create_dir_all(&c.spool)
            .map_err(|e| Failure(ExitCode::Temporary, format!("{}: {e}", c.spool.display())))?;
        let Shutdown { inbox } = shutdown;
        control::listen(&c.spool, "runnerd", inbox.tx.clone())
            .map_err(|e| Failure(ExitCode::Temporary, format!("control socket: {e}")))?;
        // The one place a running runner makes its spool: its stages open
        // this very file (OJ_SPOOL_ID), never a new one.
        let mut spool = Spool::create(&c.spool).map_err(|e| Failure(ExitCode::Temporary, e.to_string()))?;
        // A new run of the runner: a latch left by an earlier drain is lifted.
        spool.set_draining(false).map_err(|e| Failure(ExitCode::Temporary, e.to_string()))?;
        if let Some(addr) = &cfg.metrics_listen {
            use std::net::ToSocketAddrs;
            addr.to_socket_addrs()
                .map_err(|e| Failure(ExitCode::Config, format!("--metrics-listen {addr:?}: not HOST:PORT ({e})")))?;
            let bound =
                crate::scrape::serve(addr, &c.spool).map_err(|e| Failure(ExitCode::Temporary, e.to_string()))?;
            info!("metrics: serving http://{bound}/metrics");
        }
        let libexec = cfg.libexec.clone().or_else(|| std::env::current_exe().ok().and_then(|e| stages_beside(&e)));
        let now = Instant::now();
        let stages = STAGES
            .iter()
            .map(|&name| Stage {
                name,
                child: None,
                started: now,
                starts: 0,
                quick_failures: 0,
                next_start: Some(now),
                told: false,
                last_exit: None,
            })
            .collect();
        let mut env = stage_env(c);
        env.push((crate::daemon::SPOOL_ID_ENV, spool.file_id().to_string()));
        let supervisor = Supervisor {
            env,
            spool,
            libexec,
            stages,
            notify_fd: c.notify_fd,
            ready: false,
            drain_total,
            drain: Drain::Off,
        };
        Ok((supervisor, inbox))
    }
}

impl stage::Stage for Supervisor {
    const DRAIN_COMMAND: bool = true;

    fn tick(&mut self, serve: &mut Serve) -> Result<Tick, Failure> {
        if let Some(why) = self.spool.gone() {
            return Ok(Tick::Exit(self.spool_gone(&why)));
        }
        if let Some(code) = self.reap(serve) {
            return Ok(Tick::Exit(code));
        }
        self.start_due();
        if !self.ready && self.stages.iter().all(|s| s.child.is_some() && control::answers(self.spool.dir(), s.name)) {
            self.ready = true;
            info!("ready");
            config::notify_ready(self.notify_fd.take());
        }
        if let Some(code) = self.drain_step() {
            self.drain = Drain::Over(code);
        }
        Ok(match self.drain {
            Drain::Over(_) => Tick::Idle(Duration::ZERO),
            Drain::Off | Drain::On { .. } => Tick::Busy(Duration::from_millis(100)),
        })
    }

    fn event(&mut self, event: Event, _: State) {
        if let Event::Signal(libc::SIGHUP) = event {
            info!("SIGHUP: passed on to every stage");
            for s in &self.stages {
                if let Some(c) = &s.child {
                    let _ = nix::sys::signal::kill(
                        nix::unistd::Pid::from_raw(c.id() as i32),
                        nix::sys::signal::Signal::SIGHUP,
                    );
                }
            }
        }
    }

    fn status(&self, _: State) -> Value {
        let stages: Vec<Value> = self
            .stages
            .iter()
            .map(|s| {
                json!({"name": s.name, "pid": s.child.as_ref().map(|c| c.id()), "restarts": s.quick_failures,
                            "last_exit": s.last_exit})
            })
            .collect();
        let draining = match &self.drain {
            Drain::On { step, .. } => Some(format!("{step:?}").to_lowercase()),
            Drain::Off | Drain::Over(_) => None,
        };
        json!({"stage": "runnerd", "ready": self.ready, "draining": draining, "stages": stages})
    }

    fn drain(&mut self, why: &str) {
        self.begin_drain(why);
    }

    fn stop(&mut self, why: &str) -> ExitCode {
        self.stop_now(why)
    }

    fn finished(&mut self) -> ExitCode {
        match self.drain {
            Drain::Over(code) => code,
            // Not reached: the drain ends only through Over.
            Drain::Off | Drain::On { .. } => ExitCode::Failure,
        }
    }
}

impl Supervisor {
    fn stage(&mut self, name: &str) -> &mut Stage {
        self.stages.iter_mut().find(|s| s.name == name).expect("known stage")
    }

    fn program(&self, name: &str) -> PathBuf {
        match &self.libexec {
            Some(d) => d.join(name),
            None => PathBuf::from(name),
        }
    }

    /// Starts every stage that is due (not running, not done with its
    /// drain step, past its backoff).
    fn start_due(&mut self) {
        let now = Instant::now();
        for i in 0..self.stages.len() {
            let s = &self.stages[i];
            if s.child.is_some() || s.next_start.is_none_or(|t| t > now) {
                continue;
            }
            let name = s.name;
            let prog = self.program(name);
            let mut cmd = Command::new(&prog);
            cmd.stdin(std::process::Stdio::null()).envs(self.env.iter().map(|(k, v)| (k, v)));
            // Readiness is runnerd's to report, not each stage's.
            cmd.env_remove("NOTIFY_SOCKET");
            // Named once, above, not again by every stage at every start.
            for (name, _) in config::NORMAL_OJ_IGNORED {
                cmd.env_remove(name);
            }
            // Its own process group: a terminal's ^C reaches runnerd alone,
            // which then drains the stages in order.
            std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
            // SAFETY: prctl is async-signal-safe. A runnerd that dies takes its stages along.
            unsafe {
                std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
                    nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL).map_err(std::io::Error::from)
                });
            }
            let s = &mut self.stages[i];
            match cmd.spawn() {
                Ok(child) => {
                    info!("{name}: started (pid {})", child.id());
                    s.child = Some(child);
                    s.started = now;
                    s.next_start = None;
                    s.told = false;
                    s.starts += 1;
                    if s.starts > 1 {
                        let stage = labels(&[("stage", name)]);
                        crate::metrics::count(&mut self.spool, Counter::StageRestarts, &stage);
                    }
                }
                Err(e) => {
                    error!("{name}: cannot start {}: {e}", prog.display());
                    s.quick_failures += 1;
                    s.next_start = Some(now + backoff(s.quick_failures));
                }
            }
        }
    }

    /// Collects stages that exited; schedules restarts. Some(code) when the
    /// runner must stop.
    fn reap(&mut self, serve: &mut Serve) -> Option<ExitCode> {
        let mut fatal = None;
        let mut misconfigured = None;
        for s in &mut self.stages {
            let Some(child) = &mut s.child else { continue };
            let Ok(Some(st)) = child.try_wait() else { continue };
            use std::os::unix::process::ExitStatusExt;
            let code = st.code().unwrap_or_else(|| 128 + st.signal().unwrap_or(0));
            s.child = None;
            s.last_exit = Some(code);
            let ran = s.started.elapsed();
            if s.told {
                info!("{}: exited {code}", s.name);
            } else {
                warn!("{}: exited {code} after {ran:.1?}", s.name);
            }
            match (s.name, ExitCode::from_code(code)) {
                // claimd found the configuration wrong while jobs may be in
                // flight (a refused SANDBOX_TOKEN): they are finished first.
                ("claimd", Some(ExitCode::Config)) => misconfigured = Some("claimd: bad configuration".to_string()),
                (_, Some(ExitCode::Config)) => {
                    fatal = Some((ExitCode::Config, format!("{}: bad configuration", s.name)))
                }
                ("leased", Some(ExitCode::Failure)) => {
                    fatal = Some((ExitCode::Failure, "leased: the hub no longer knows this runner".into()))
                }
                ("claimd", Some(ExitCode::Failure)) => {
                    fatal = Some((ExitCode::Failure, "claimd: the hub refused registration".into()))
                }
                _ => {}
            }
            s.quick_failures = if ran > Duration::from_secs(60) { 0 } else { s.quick_failures + 1 };
            // A stage told to stop is restarted only if its drain step finds
            // work left (drain_step); any other is restarted after a backoff.
            s.next_start = if s.told { None } else { Some(Instant::now() + backoff(s.quick_failures)) };
        }
        if let Some((code, why)) = fatal {
            error!("{why}: stopping every stage at once, without a drain");
            self.kill_all();
            return Some(code);
        }
        if let Some(why) = misconfigured {
            error!("{why}: draining (claims in flight are finished and reported), then exiting 100; not restarted");
            self.stage("claimd").next_start = None;
            // A drain asked (the next TERM stops at once), begun if it was not.
            serve.ask_drain(self, &why);
            if let Drain::On { ending, .. } = &mut self.drain {
                *ending = std::mem::replace(ending, Ending::Clean).misconfigured(why);
            }
        }
        None
    }

    fn begin_drain(&mut self, why: &str) {
        if self.drain != Drain::Off {
            return;
        }
        info!("{why}: draining (deadline {:?}; a second TERM or INT stops at once)", self.drain_total);
        config::sd_notify("STOPPING=1");
        // The latch first: from this moment no claim starts judging.
        if let Err(e) = self.spool.set_draining(true) {
            error!("drain latch: {e}");
        }
        let now = Instant::now();
        self.drain =
            Drain::On { step: Step::Claimd, begun: now, step_begun: now, extended: None, ending: Ending::Clean };
    }

    /// Advances the drain, if one is on; Some(code) when it is over.
    fn drain_step(&mut self) -> Option<ExitCode> {
        let Drain::On { step, begun, step_begun, extended, .. } = &mut self.drain else { return None };
        let (step, begun, step_begun) = (*step, *begun, *step_begun);
        let now = Instant::now();
        // Under systemd: the drain is progress, not a hang.
        if extended.is_none_or(|t| t.elapsed() >= Duration::from_secs(10)) {
            *extended = Some(now);
            config::sd_notify(&format!("EXTEND_TIMEOUT_USEC={}", 30_000_000u64));
        }
        let row = drain::row(step);
        let name = row.stage;
        let until = begun + row.until(step_begun - begun, self.drain_total);
        let done = self.step_done(row);
        if !done && now < until {
            let s = self.stage(name);
            if s.child.is_none() && s.next_start.is_none() {
                // It exited (or died) with its work unfinished: again.
                s.next_start = Some(now);
            }
            self.tell(name);
            return None;
        }
        if !done {
            if let Drain::On { ending, .. } = &mut self.drain {
                *ending = std::mem::replace(ending, Ending::Clean).cut();
            }
            let left = self.leftovers();
            error!("drain: {name} did not finish in time; killing it ({left})");
            self.kill(name);
        }
        // This step is over: the stage is not restarted.
        self.stage(name).next_start = None;
        if row.scan_after {
            // Scan again: anything claimed or prepped late goes back too.
            match self.spool.abort_unstarted() {
                Ok(ids) if !ids.is_empty() => info!("drain: handed back {} claim(s) not started: {ids:?}", ids.len()),
                Ok(_) => {}
                Err(e) => error!("drain scan: {e}"),
            }
        }
        let Drain::On { step, step_begun, ending, .. } = &mut self.drain else { return None };
        let Some(next) = row.next else {
            let ending = ending.clone();
            if matches!(ending, Ending::Cut | Ending::Misconfigured { cut: true, .. }) {
                warn!("drain cut by its deadline: {}; left to lease expiry", self.leftovers());
            } else {
                info!("drained: every job held was finished and reported");
            }
            return Some(match ending {
                Ending::Misconfigured { why, .. } => {
                    error!("{why}: fix the configuration, then start the runner again");
                    ExitCode::Config
                }
                Ending::Cut => ExitCode::Failure,
                Ending::Clean => ExitCode::Ok,
            });
        };
        (*step, *step_begun) = (next, now);
        info!("drain: {name} done; next {}", drain::row(next).does);
        None
    }

    /// Whether a drain step's work is done (its stage exited, and what it
    /// owns is finished: [`drain::Row::is_done`]). A stage that died early
    /// is restarted by `start_due` and told again.
    fn step_done(&mut self, row: &drain::Row) -> bool {
        let running = self.stage(row.stage).child.is_some();
        let started = self.spool.claims_in(&[ClaimState::Started]).map(|c| c.len()).unwrap_or(1);
        let outbox = self.spool.outbox_len().map(|o| o.0).unwrap_or(1);
        row.is_done(running, started, outbox)
    }

    fn leftovers(&self) -> String {
        let counts = self.spool.counts().unwrap_or_default();
        let outbox = self.spool.outbox_len().map(|o| o.0).unwrap_or(-1);
        format!("claims {counts:?}, outbox {outbox}")
    }

    /// Sends TERM to a stage once per run of it.
    fn tell(&mut self, name: &str) {
        let s = self.stage(name);
        if s.told {
            return;
        }
        if let Some(c) = &s.child {
            let _ =
                nix::sys::signal::kill(nix::unistd::Pid::from_raw(c.id() as i32), nix::sys::signal::Signal::SIGTERM);
            s.told = true;
        }
    }

    fn kill(&mut self, name: &str) {
        let s = self.stage(name);
        if let Some(mut c) = s.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    fn kill_all(&mut self) {
        for s in &mut self.stages {
            if let Some(mut c) = s.child.take() {
                // The stage's whole group: a judge's sandboxed programs too.
                let _ = nix::sys::signal::killpg(
                    nix::unistd::Pid::from_raw(c.id() as i32),
                    nix::sys::signal::Signal::SIGKILL,
                );
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }

    /// The spool was deleted or replaced under the runner: no stage is
    /// started again (it would find no spool, or another one), each is
    /// given [`GONE_GRACE`] to stop on its own (leased first hands back the
    /// jobs it keeps the leases of), and the runner exits 100.
    fn spool_gone(&mut self, why: &str) -> ExitCode {
        error!("{why}: stopping every stage, restarting none; exiting 100");
        config::sd_notify("STOPPING=1");
        for s in &mut self.stages {
            s.next_start = None;
        }
        let end = Instant::now() + GONE_GRACE;
        while Instant::now() < end && self.stages.iter().any(|s| s.child.is_some()) {
            for s in &mut self.stages {
                if let Some(st) = s.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                    info!("{}: exited {}", s.name, st.code().unwrap_or(-1));
                    s.child = None;
                }
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        self.kill_all();
        error!("{why}: the runner stopped; start it again on a spool (a new one is made at start)");
        ExitCode::Config
    }

    fn stop_now(&mut self, why: &str) -> ExitCode {
        warn!("{why}: stopping every stage at once; {}", self.leftovers());
        self.kill_all();
        ExitCode::Failure
    }
}

/// Restart delay after `n` quick failures in a row: 0.5, 1, 2, 4, 8, 16 s
/// (scaled by `OJ_TIME_SCALE`).
fn backoff(n: u32) -> Duration {
    patience::scaled(0.5 * (1u64 << n.min(6).saturating_sub(1)) as f64)
}

/// The environment every stage gets: runnerd's own flags, resolved, so
/// `runnerd --backend-url …` means the same to its stages.
fn stage_env(c: &Common) -> Vec<(&'static str, String)> {
    let mut env =
        vec![("OJ_SPOOL", c.spool.to_string_lossy().into_owned()), ("DRAIN_TIMEOUT_SEC", c.drain_timeout.clone())];
    let mut put = |k: &'static str, v: &Option<String>| {
        if let Some(v) = v {
            env.push((k, v.clone()));
        }
    };
    put("BACKEND_URL", &c.backend_url);
    put("BACKEND_API", &c.backend_api);
    put("RUNNER_REGISTRATION_TOKEN", &c.registration_token);
    put("RUNNER_NAME", &c.runner_name);
    put("SANDBOX_TOKEN", &c.sandbox_token);
    let path = |p: &Option<PathBuf>| p.as_ref().map(|p| p.to_string_lossy().into_owned());
    put("RUNNER_REGISTRATION_TOKEN_FILE", &path(&c.registration_token_file));
    put("SANDBOX_TOKEN_FILE", &path(&c.sandbox_token_file));
    env
}

/// `runnerd status`: the spool's view, then each stage's own answer. The
/// spool is only read (nothing migrated, nothing written); a spool that
/// cannot be read is an error, never an empty runner.
pub fn status(spool_dir: &Path) -> ExitCode {
    if let Some(none) = no_spool(spool_dir) {
        return none;
    }
    let view = Spool::open_read_only(spool_dir).and_then(|spool| {
        let id = spool.identity()?;
        Ok(json!({
            "spool": spool_dir,
            "runner_id": id.as_ref().map(|i| &i.runner_id),
            "config": id.as_ref().map(|i| serde_json::to_value(&i.config).unwrap()),
            "claims": spool.counts()?,
            "held_jobs": spool.held_jobs()?,
            "outbox": spool.outbox_len()?.0,
            "dead_outcomes": spool.dead_count()?,
            "draining": spool.draining()?,
            "last_beat_at_ms": Some(spool.last_beat()?).filter(|t| *t > 0),
            "phases": crate::metrics::recent_phases(&spool)?,
            "phases_window": format!("the last {} timings of each phase", crate::phase::RECENT),
        }))
    });
    match view {
        Ok(v) => println!("{v}"),
        Err(e) => {
            error!("{e}");
            return ExitCode::Failure;
        }
    }
    for name in std::iter::once("runnerd").chain(STAGES) {
        let line = control::request(spool_dir, name, &json!({"cmd": "status"}), Duration::from_secs(3))
            .unwrap_or_else(|e| json!({"stage": name, "error": format!("not answering: {e}")}));
        println!("{line}");
    }
    ExitCode::Ok
}

/// `runnerd metrics`: the runner's metrics in the Prometheus text format,
/// read from the spool (read-only: beside a running runner or a stopped one).
pub fn metrics(spool_dir: &Path) -> ExitCode {
    if let Some(none) = no_spool(spool_dir) {
        return none;
    }
    match Spool::open_read_only(spool_dir).and_then(|s| crate::metrics::render(&s)) {
        Ok(text) => {
            print!("{text}");
            ExitCode::Ok
        }
        Err(e) => {
            error!("{e}");
            ExitCode::Failure
        }
    }
}

/// `runnerd drain`: drains a running runnerd, as TERM would (`wait`: until
/// it has exited, at most `drain_timeout` plus 30 s).
pub fn drain_command(spool_dir: &Path, wait: bool, drain_timeout: Duration) -> ExitCode {
    match control::request(spool_dir, "runnerd", &json!({"cmd": "drain"}), Duration::from_secs(5)) {
        Ok(v) => println!("{v}"),
        Err(e) => {
            error!("runnerd is not answering on {}: {e}", control::socket_path(spool_dir, "runnerd").display());
            return ExitCode::Failure;
        }
    }
    if wait {
        let end = Instant::now() + drain_timeout + Duration::from_secs(30);
        while control::request(spool_dir, "runnerd", &json!({"cmd": "status"}), Duration::from_secs(2)).is_ok() {
            if Instant::now() > end {
                error!("runnerd still runs after the drain timeout");
                return ExitCode::Failure;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    ExitCode::Ok
}

/// A command's exit where `spool_dir` holds no spool (said, not made).
fn no_spool(spool_dir: &Path) -> Option<ExitCode> {
    if spool_dir.join(crate::spool::DB_FILE).exists() {
        return None;
    }
    error!("no spool at {}", spool_dir.display());
    Some(ExitCode::Failure)
}

/// `runnerd latch`: sets the spool's drain latch (`on`), or lifts it.
pub fn latch(spool_dir: &Path, on: bool) -> ExitCode {
    if let Some(none) = no_spool(spool_dir) {
        return none;
    }
    let r = Spool::open(spool_dir).and_then(|mut s| {
        s.set_draining(on)?;
        // With no claimd to hand back what it claimed, do it here.
        if on && !control::answers(spool_dir, "claimd") {
            let ids = s.abort_unstarted()?;
            if !ids.is_empty() {
                info!("claimd is not running: handed back {} claim(s) not started as abort(drain)", ids.len());
                control::poke(spool_dir, "reportd");
            }
        }
        Ok(())
    });
    match r {
        Ok(()) => {
            info!("drain latch {}", if on { "set: no claim starts judging" } else { "lifted" });
            for stage in ["claimd", "judge-exec"] {
                control::poke(spool_dir, stage);
            }
            ExitCode::Ok
        }
        Err(e) => {
            error!("{e}");
            ExitCode::Temporary
        }
    }
}

pub fn check(spool_dir: &Path) -> ExitCode {
    match control::request(spool_dir, "runnerd", &json!({"cmd": "status"}), Duration::from_secs(3)) {
        Ok(v)
            if v["ready"] == true && v["stages"].as_array().is_some_and(|a| a.iter().all(|s| !s["pid"].is_null())) =>
        {
            ExitCode::Ok
        }
        _ => ExitCode::Failure,
    }
}

#[cfg(test)]
mod tests {
    use super::{drain, stages_beside, Ending, STAGES};

    /// A drain's exit code: 100 when claimd found the configuration
    /// wrong, cut or not, whichever came first; else 1 when cut.
    #[test]
    fn a_misconfigured_drain_ends_in_100_and_remembers_a_cut() {
        let why = || "claimd: bad configuration".to_string();
        assert_eq!(Ending::Clean.cut(), Ending::Cut);
        assert_eq!(Ending::Cut.cut(), Ending::Cut);
        assert_eq!(Ending::Clean.misconfigured(why()), Ending::Misconfigured { why: why(), cut: false });
        assert_eq!(Ending::Cut.misconfigured(why()), Ending::Misconfigured { why: why(), cut: true });
        assert_eq!(Ending::Clean.misconfigured(why()).cut(), Ending::Misconfigured { why: why(), cut: true });
    }

    #[test]
    fn stages_start_in_the_reverse_of_the_drain_order() {
        let drained_last_first: Vec<&str> = drain::ORDER.iter().rev().map(|r| r.stage).collect();
        assert_eq!(STAGES.to_vec(), drained_last_first);
        // Each stage once; the one stopped first starts last, and the leases
        // are kept from before the first claim.
        let mut unique = STAGES.to_vec();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), STAGES.len(), "{STAGES:?}");
        assert_eq!(STAGES.last(), Some(&drain::ORDER[0].stage));
        let at = |name: &str| STAGES.iter().position(|s| *s == name).unwrap();
        assert!(at("leased") < at("claimd"), "{STAGES:?}");
    }

    #[test]
    fn stages_are_found_beside_runnerd_then_in_the_installed_libexec() {
        let root = std::env::temp_dir().join(format!("runnerd-stages-{}", std::process::id()));
        let (sbin, libexec) = (root.join("sbin"), root.join("libexec/ojrunner"));
        std::fs::create_dir_all(&sbin).unwrap();
        std::fs::create_dir_all(&libexec).unwrap();
        let exe = sbin.join("runnerd");
        assert_eq!(stages_beside(&exe), None, "no claimd anywhere: PATH");
        std::fs::write(libexec.join("claimd"), "").unwrap();
        assert_eq!(stages_beside(&exe), Some(libexec.clone()), "as make install lays them out");
        std::fs::write(sbin.join("claimd"), "").unwrap();
        assert_eq!(stages_beside(&exe), Some(sbin.clone()), "beside runnerd comes first");
        std::fs::remove_dir_all(&root).unwrap();
    }
}
