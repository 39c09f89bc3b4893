//! The runner's configuration: flags with environment fallbacks, under
//! Normal-OJ's names, so ojrunner drops in where its Python runner ran.
//! Every stage takes the same set, so `runnerd` passes its environment on
//! and each stage can also be run alone.

use clap::Args;
use std::path::PathBuf;
use std::time::Duration;

pub use ojrunner_daemon::exit;
pub use ojrunner_daemon::readiness::{notify_ready, sd_notify};

/// What every stage of the runner is told.
#[derive(Args, Clone, Debug)]
pub struct Common {
    /// The hub's base URL (the runner API).
    #[arg(long, env = "BACKEND_URL", value_name = "URL")]
    pub backend_url: Option<String>,

    /// The base URL of the testdata channel (/problem/*), if not BACKEND_URL.
    #[arg(long, env = "BACKEND_API", value_name = "URL")]
    pub backend_api: Option<String>,

    /// The shared secret that registers a runner.
    #[arg(long, env = "RUNNER_REGISTRATION_TOKEN", hide_env_values = true, value_name = "TOKEN")]
    pub registration_token: Option<String>,

    /// Read the registration token from the first line of FILE instead.
    #[arg(long, env = "RUNNER_REGISTRATION_TOKEN_FILE", value_name = "FILE")]
    pub registration_token_file: Option<PathBuf>,

    /// The runner's name at the hub (default: the host name).
    #[arg(long = "name", env = "RUNNER_NAME", value_name = "NAME")]
    pub runner_name: Option<String>,

    /// The testdata token (Normal-OJ's SANDBOX_TOKEN).
    #[arg(long, env = "SANDBOX_TOKEN", hide_env_values = true, value_name = "TOKEN")]
    pub sandbox_token: Option<String>,

    /// Read the testdata token from the first line of FILE instead.
    #[arg(long, env = "SANDBOX_TOKEN_FILE", value_name = "FILE")]
    pub sandbox_token_file: Option<PathBuf>,

    /// The spool directory shared by the runner's stages.
    #[arg(long, env = "OJ_SPOOL", default_value = "/var/lib/ojrunner", value_name = "DIR")]
    pub spool: PathBuf,

    /// The drain's deadline, in seconds (`540`, `540.0`, `0.5`), shared by
    /// all its steps ([`Common::drain_timeout`]).
    #[arg(long, env = "DRAIN_TIMEOUT_SEC", default_value = "540", value_name = "SEC")]
    pub drain_timeout: String,

    /// Write a newline to FD and close it once ready (s6's notification-fd).
    #[arg(long, value_name = "FD")]
    pub notify_fd: Option<i32>,
}

/// Normal-OJ's settings that ojrunner has no use for, and what it uses
/// instead (`$OJ_SPOOL` stands for the spool). A stage that finds one set
/// says so once, at start ([`name_normal_oj_leftovers`]); `runnerd` says it
/// for its stages, which it starts without them.
pub const NORMAL_OJ_IGNORED: &[(&str, &str)] = &[
    ("TESTDATA_ROOT", "the per-host testdata cache in $OJ_SPOOL/testdata"),
    ("SUBMISSION_DIR", "claims in the spool $OJ_SPOOL (their files in $OJ_SPOOL/claims)"),
    ("SUBMISSION_BACKUP_DIR", "claims in the spool $OJ_SPOOL (results the hub refused in $OJ_SPOOL/evidence)"),
    ("REDIS_URL", "no Redis: the queue is the hub's"),
    ("DISPATCHER_CONFIG", "OJ_WORKERS (runs at once) and the hub's settings"),
];

/// One line per variable of [`NORMAL_OJ_IGNORED`] that `is_set` says is
/// set (values are not shown: `REDIS_URL` may hold a password).
pub fn normal_oj_leftovers(is_set: impl Fn(&str) -> bool, spool: &std::path::Path) -> Vec<String> {
    NORMAL_OJ_IGNORED
        .iter()
        .filter(|(name, _)| is_set(name))
        .map(|(name, instead)| {
            let instead = instead.replace("$OJ_SPOOL", &spool.display().to_string());
            format!("{name} is Normal-OJ's and ignored here; ojrunner uses {instead}")
        })
        .collect()
}

/// Logs, at warn, each of Normal-OJ's settings set in this process's
/// environment that ojrunner ignores.
pub fn name_normal_oj_leftovers(spool: &std::path::Path) {
    for line in normal_oj_leftovers(|name| std::env::var_os(name).is_some(), spool) {
        log::warn!("{line}");
    }
}

/// A configuration error: the program exits
/// [`ExitCode::Config`](ojrunner_daemon::ExitCode::Config).
#[derive(Debug)]
pub struct ConfigError(pub String);

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl Common {
    /// A client of the hub this configuration names; `sandbox_token` for
    /// the testdata channel (claimd's alone: the other stages send none).
    pub fn hub_client(&self, sandbox_token: &str) -> Result<crate::hub::HubClient, ConfigError> {
        Ok(crate::hub::HubClient::new(&self.backend_url()?, &self.testdata_url()?, sandbox_token))
    }

    /// The drain's deadline: `DRAIN_TIMEOUT_SEC` as a [`seconds`] value.
    pub fn drain_timeout(&self) -> Result<Duration, ConfigError> {
        seconds("DRAIN_TIMEOUT_SEC (--drain-timeout)", &self.drain_timeout)
    }

    /// The runner API's base URL, without a trailing slash.
    pub fn backend_url(&self) -> Result<String, ConfigError> {
        let url = self
            .backend_url
            .as_deref()
            .ok_or_else(|| ConfigError("no hub: set BACKEND_URL (or --backend-url)".into()))?;
        check_url(url, "BACKEND_URL")
    }

    /// The testdata channel's base URL: BACKEND_API, else BACKEND_URL.
    pub fn testdata_url(&self) -> Result<String, ConfigError> {
        match &self.backend_api {
            Some(u) if !u.is_empty() => check_url(u, "BACKEND_API"),
            _ => self.backend_url(),
        }
    }

    pub fn registration_token(&self) -> Result<String, ConfigError> {
        secret(&self.registration_token, &self.registration_token_file, "RUNNER_REGISTRATION_TOKEN")?.ok_or_else(|| {
            ConfigError("no registration token: set RUNNER_REGISTRATION_TOKEN or --registration-token-file".into())
        })
    }

    /// The testdata token; Normal-OJ's default when none is set.
    pub fn sandbox_token(&self) -> Result<String, ConfigError> {
        Ok(secret(&self.sandbox_token, &self.sandbox_token_file, "SANDBOX_TOKEN")?
            .unwrap_or_else(|| "KoNoSandboxDa".to_string()))
    }

    pub fn runner_name(&self) -> String {
        match &self.runner_name {
            Some(n) if !n.is_empty() => n.clone(),
            _ => nix::unistd::gethostname()
                .ok()
                .and_then(|h| h.into_string().ok())
                .unwrap_or_else(|| "ojrunner".to_string()),
        }
    }
}

fn check_url(url: &str, what: &str) -> Result<String, ConfigError> {
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(ConfigError(format!("{what}={url:?} is not an http:// or https:// URL")));
    }
    Ok(url.trim_end_matches('/').to_string())
}

/// A duration in seconds as the environment and the command line give it
/// (`ojrunner_daemon::duration::seconds`); an error exits 100.
pub fn seconds(what: &str, value: &str) -> Result<Duration, ConfigError> {
    ojrunner_daemon::duration::seconds(what, value).map_err(|e| ConfigError(e.0))
}

/// A secret from a flag or a file (first line). Never logged.
fn secret(value: &Option<String>, file: &Option<PathBuf>, what: &str) -> Result<Option<String>, ConfigError> {
    if let Some(f) = file {
        let line = ojrunner_daemon::token_file::read(f)
            .map_err(|e| ConfigError(format!("{what} file {}: {e}", f.display())))?;
        if line.is_empty() {
            return Err(ConfigError(format!("{what} file {} is empty", f.display())));
        }
        return Ok(Some(line));
    }
    Ok(value.clone().filter(|v| !v.is_empty()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normal_ojs_leftovers_are_named_with_what_is_used_instead() {
        let spool = std::path::Path::new("/var/lib/ojrunner");
        assert!(normal_oj_leftovers(|_| false, spool).is_empty());
        let lines = normal_oj_leftovers(|n| n == "TESTDATA_ROOT" || n == "REDIS_URL", spool);
        assert_eq!(
            lines,
            [
                "TESTDATA_ROOT is Normal-OJ's and ignored here; ojrunner uses the per-host testdata cache in \
                 /var/lib/ojrunner/testdata",
                "REDIS_URL is Normal-OJ's and ignored here; ojrunner uses no Redis: the queue is the hub's",
            ]
        );
        assert_eq!(normal_oj_leftovers(|_| true, spool).len(), NORMAL_OJ_IGNORED.len());
    }

    #[test]
    fn durations_are_whole_or_decimal_seconds_and_nothing_else() {
        let s = |v: &str| seconds("X_SEC", v).map(|d| d.as_millis()).map_err(|e| e.0);
        assert_eq!(s("60"), Ok(60_000));
        assert_eq!(s("60.0"), Ok(60_000));
        assert_eq!(s("0.5"), Ok(500));
        assert_eq!(s(" 540 "), Ok(540_000));
        for bad in ["", "-1", "1e3", "inf", "NaN", ".5", "60.", "1,5", "sixty", "0x10", "1.2.3", "99999999999999"] {
            let e = s(bad).unwrap_err();
            assert!(e.contains("X_SEC") && e.contains(&format!("{bad:?}")), "{bad:?}: {e}");
        }
    }
}
