//! The drain of the split layout: one runit or s6 service per stage
//! (`etc/runit/split`, `etc/s6/split`), stopped one by one in the order of
//! the drain table ([`crate::drain::ORDER`]). `runnerd drain --services DIR
//! --supervisor runit|s6` runs it; the layouts' `drain` scripts are that
//! command and nothing more.
//!
//! runit and s6 stop services in parallel and know no order, so the order
//! comes from here, step by step, as `runnerd` walks it for its own
//! children:
//!
//! 1. latch: no claim starts judging from now on (`runnerd latch`);
//! 2. for each row of the table: wait until its work is done while its
//!    service still runs (no claim started, the outbox empty), then tell
//!    the supervisor to stop it, all within the row's share of the
//!    deadline; a service still up past its share is killed, and the drain
//!    is cut.
//!
//! Unlike `runnerd`, this drain hands back nothing itself: `claimd` does on
//! its way down, and what it left (it ran out of time) is said and left to
//! lease expiry. Progress goes to standard output, one `drain: …` line a
//! step.
//!
//! The configuration is the services' own, read as their run scripts read
//! it: `$OJRUNNER_ENV_FILE` (default `/etc/ojrunner/ojrunner.env`), then
//! the envdir `DIR/ojrunner-claimd/env/`, the later winning.

use crate::config;
use crate::drain::{self, Done};
use crate::spool::{ClaimState, Spool};
use ojrunner_daemon::user_file::CONFIG_MAX;
use ojrunner_daemon::ExitCode;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The supervisor that runs the split layout's services.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Supervisor {
    /// `runsv`, told with `sv`.
    Runit,
    /// `s6-supervise`, told with `s6-svc`.
    S6,
}

/// How long a killed service may take to go down before the drain gives up
/// on it.
const KILL_WAIT: Duration = Duration::from_secs(10);

/// How often the spool is read while a step waits for its work.
const POLL: Duration = Duration::from_millis(200);

/// Where the configuration is when `OJRUNNER_ENV_FILE` is not set (the run
/// scripts' default).
const ENV_FILE: &str = "/etc/ojrunner/ojrunner.env";

impl Supervisor {
    /// Brings `svc` down, waiting at most `wait`; whether it is down.
    fn stop(self, svc: &Path, wait: Duration) -> bool {
        match self {
            // sv's wait is whole seconds.
            Supervisor::Runit => quiet(Command::new("sv").arg("-w").arg(wait.as_secs().max(1).to_string()))
                .args(["-v", "down"])
                .arg(svc)
                .status(),
            // -wD: down and its finish script done.
            Supervisor::S6 => {
                Command::new("s6-svc").arg("-T").arg(wait.as_millis().to_string()).args(["-wD", "-d"]).arg(svc).status()
            }
        }
        .is_ok_and(|s| s.success())
    }

    /// Kills `svc` and waits for it to go down; whether it went.
    fn kill(self, svc: &Path) -> bool {
        let wait = KILL_WAIT.as_secs().to_string();
        match self {
            Supervisor::Runit => {
                let _ = quiet(Command::new("sv").arg("kill").arg(svc)).status();
                quiet(Command::new("sv").args(["-w", &wait, "-v", "down"]).arg(svc)).status()
            }
            Supervisor::S6 => {
                let _ = Command::new("s6-svc").arg("-k").arg(svc).status();
                Command::new("s6-svwait").args(["-t", &KILL_WAIT.as_millis().to_string(), "-D"]).arg(svc).status()
            }
        }
        .is_ok_and(|s| s.success())
    }
}

/// `sv -v` says "ok: down: …" on standard output; the drain says it its way.
fn quiet(cmd: &mut Command) -> &mut Command {
    cmd.stdout(Stdio::null())
}

fn say(what: &str) {
    println!("drain: {what}");
}

/// Drains the split layout in `services` (the directory holding the
/// `ojrunner-<stage>` service directories) under `supervisor`, and leaves
/// its four services down. The exit code: 0 drained, 1 cut (a step ran out
/// of time, or a service would not stop), 100 no usable configuration (no
/// spool to latch, a bad deadline), 111 the envdir cannot be read.
pub fn drain(services: &Path, supervisor: Supervisor) -> ExitCode {
    if let Err(e) = load_configuration(services) {
        say(&format!("cannot read the configuration: {e}"));
        return ExitCode::Temporary;
    }
    let spool = PathBuf::from(std::env::var_os("OJ_SPOOL").unwrap_or_else(|| "/var/lib/ojrunner".into()));
    let total = match config::seconds("DRAIN_TIMEOUT_SEC", &std::env::var("DRAIN_TIMEOUT_SEC").unwrap_or("540".into()))
    {
        Ok(t) => t,
        Err(e) => {
            say(&e.0);
            return ExitCode::Config;
        }
    };
    let begun = Instant::now();
    if crate::stage::runnerd::latch(&spool, true) != ExitCode::Ok {
        say("cannot set the latch (is the configuration there?)");
        return ExitCode::Config;
    }
    say("latched: nothing starts judging from now on");

    let mut cut = false;
    let mut held_said = 0;
    let mut step_at = Duration::ZERO;
    let mut step = Some(drain::ORDER[0].step);
    while let Some(s) = step {
        let row = drain::row(s);
        let until = begun + row.until(step_at, total);
        let svc = services.join(format!("ojrunner-{}", row.stage));
        // The work first, while the supervisor still restarts a stage
        // that dies: a crash never strands a job.
        if let Some((work_done, met, missed)) = awaited(row.done) {
            if wait_for(&spool, until, work_done) {
                say(met);
            } else {
                say(missed);
                cut = true;
            }
        }
        let wait = until.saturating_duration_since(Instant::now()).max(Duration::from_secs(1));
        if supervisor.stop(&svc, wait) {
            say(&format!("{} down", row.stage));
        } else {
            say(&format!("{} still runs after {}s: killing it", row.stage, wait.as_secs()));
            cut = true;
            if !supervisor.kill(&svc) {
                say(&format!("{} would not stop", row.stage));
            }
        }
        if row.scan_after {
            let held = SpoolView::read(&spool).unstarted;
            if held > held_said {
                say(&format!("{held} claim(s) not started are still held: left to lease expiry"));
                held_said = held;
                cut = true;
            }
        }
        step_at = begun.elapsed();
        step = row.next;
    }
    if cut {
        say(&format!("drain cut: {}", SpoolView::read(&spool)));
        ExitCode::Failure
    } else {
        say("drained: every job held was finished and reported");
        ExitCode::Ok
    }
}

/// What a step waits for before its service is stopped, and what the drain
/// says when it came or did not: None for a step whose work is its exit.
type Awaited = (fn(&SpoolView) -> bool, &'static str, &'static str);

fn awaited(done: Done) -> Option<Awaited> {
    match done {
        Done::Exited => None,
        Done::NoneStarted => Some((
            |v| v.started == Some(0),
            "no claim in flight",
            "claims still in flight at the deadline (less the reporting reserve)",
        )),
        Done::OutboxEmpty => Some((|v| v.outbox == Some(0), "outbox empty", "outbox not empty at the deadline")),
    }
}

/// Polls the spool until `test` holds (true) or `until` passes (false).
fn wait_for(spool: &Path, until: Instant, test: fn(&SpoolView) -> bool) -> bool {
    loop {
        if test(&SpoolView::read(spool)) {
            return true;
        }
        if Instant::now() >= until {
            return false;
        }
        std::thread::sleep(POLL);
    }
}

/// What the drain reads of the spool; a number it could not read is None,
/// and never counts as done.
#[derive(Debug, Default)]
struct SpoolView {
    started: Option<usize>,
    outbox: Option<i64>,
    /// Claims claimed or prepped: not started, still held.
    unstarted: usize,
    counts: BTreeMap<String, i64>,
}

impl SpoolView {
    fn read(dir: &Path) -> SpoolView {
        let Ok(spool) = Spool::open_read_only(dir) else { return SpoolView::default() };
        let Ok(counts) = spool.counts() else { return SpoolView::default() };
        let count = |s: ClaimState| counts.get(s.as_str()).copied().unwrap_or(0) as usize;
        SpoolView {
            started: Some(count(ClaimState::Started)),
            outbox: spool.outbox_len().ok().map(|o| o.0),
            unstarted: count(ClaimState::Claimed) + count(ClaimState::Prepped),
            counts,
        }
    }
}

impl std::fmt::Display for SpoolView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let outbox = self.outbox.map_or("unknown".to_string(), |o| o.to_string());
        write!(f, "claims {:?}, outbox {outbox}", self.counts)
    }
}

/// Puts the services' configuration into this process's environment, as
/// their run scripts do: the env file, then claimd's envdir. Called before
/// anything else runs, while the process has one thread.
fn load_configuration(services: &Path) -> std::io::Result<()> {
    let file = std::env::var_os("OJRUNNER_ENV_FILE").map_or_else(|| PathBuf::from(ENV_FILE), PathBuf::from);
    // An env file that cannot be read is skipped, as the run scripts skip it.
    if let Ok(text) = ojrunner_daemon::user_file::read_user_text(&file, CONFIG_MAX, "env file") {
        for (k, v) in env_file(&text) {
            std::env::set_var(k, v);
        }
    }
    let envdir = services.join("ojrunner-claimd/env");
    if envdir.is_dir() {
        for (k, v) in read_envdir(&envdir)? {
            match v {
                Some(v) => std::env::set_var(k, v),
                None => std::env::remove_var(k),
            }
        }
    }
    Ok(())
}

/// The `KEY=value` lines of an env file (`etc/ojrunner.env`'s format: no
/// quotes, no spaces around `=`); comments, blank lines and lines of
/// another shape are skipped.
fn env_file(text: &str) -> Vec<(&str, &str)> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .filter(|(k, _)| {
            k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
                && k.bytes().next().is_some_and(|b| !b.is_ascii_digit())
        })
        .collect()
}

/// An envdir, as `chpst -e` and `s6-envdir` read it: one file per
/// variable, its first line without trailing blanks; an empty file unsets
/// the variable (None).
fn read_envdir(dir: &Path) -> std::io::Result<Vec<(String, Option<String>)>> {
    let mut vars = Vec::new();
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') || name.contains('=') || !e.file_type()?.is_file() {
            continue;
        }
        let bytes = ojrunner_daemon::user_file::read_user_file(&e.path(), CONFIG_MAX, "file of an envdir")
            .map_err(|err| std::io::Error::new(err.kind(), format!("{}: {err}", e.path().display())))?;
        let value = (!bytes.is_empty()).then(|| {
            let line = bytes.split(|b| *b == b'\n').next().unwrap_or_default();
            let line: Vec<u8> = line.iter().map(|b| if *b == 0 { b'\n' } else { *b }).collect();
            String::from_utf8_lossy(&line).trim_end_matches([' ', '\t']).to_string()
        });
        vars.push((name, value));
    }
    Ok(vars)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_step_waits_for_its_own_work_and_an_unreadable_spool_is_never_done() {
        let view = |started, outbox| SpoolView { started, outbox, ..SpoolView::default() };
        assert!(awaited(Done::Exited).is_none(), "claimd and leased: their exit is their work");
        let (no_started, ..) = awaited(Done::NoneStarted).unwrap();
        assert!(no_started(&view(Some(0), Some(3))) && !no_started(&view(Some(1), Some(0))));
        let (no_outbox, ..) = awaited(Done::OutboxEmpty).unwrap();
        assert!(no_outbox(&view(Some(2), Some(0))) && !no_outbox(&view(Some(0), Some(1))));
        let unreadable = SpoolView::default();
        assert!(!no_started(&unreadable) && !no_outbox(&unreadable));
        // What each row of the table waits for.
        let waits: Vec<bool> = drain::ORDER.iter().map(|r| awaited(r.done).is_some()).collect();
        assert_eq!(waits, [false, true, true, false]);
    }

    #[test]
    fn an_env_file_is_read_as_plain_key_value_lines() {
        let text = "# a comment\n\nBACKEND_URL=http://hub:8080\n#OJ_SPOOL=/nowhere\n  OJ_SPOOL=/srv/spool\n\
                    not a line\n1X=no\nDRAIN_TIMEOUT_SEC=60\nEMPTY=\n";
        assert_eq!(
            env_file(text),
            [
                ("BACKEND_URL", "http://hub:8080"),
                ("OJ_SPOOL", "/srv/spool"),
                ("DRAIN_TIMEOUT_SEC", "60"),
                ("EMPTY", "")
            ]
        );
    }

    #[test]
    fn an_envdir_gives_first_lines_and_unsets_with_empty_files() {
        let dir = ojrunner_daemon::test_dir("ojrunner-envdir");
        std::fs::write(dir.join("OJ_SPOOL"), "/srv/spool  \nignored\n").unwrap();
        std::fs::write(dir.join("GONE"), "").unwrap();
        std::fs::write(dir.join(".hidden"), "x\n").unwrap();
        let mut vars = read_envdir(&dir).unwrap();
        vars.sort();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(vars, [("GONE".to_string(), None), ("OJ_SPOOL".to_string(), Some("/srv/spool".to_string()))]);
    }
}
