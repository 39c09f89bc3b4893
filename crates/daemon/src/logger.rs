//! One line per event on stderr, as supervisors' loggers (svlogd, s6-log,
//! journald) expect: `LEVEL stage: message`, no colours, no timestamps of
//! our own (the logger adds them; `OJ_LOG_TIME=1` adds ours for bare use).
//!
//! What is logged comes from `RUST_LOG`, read as env_logger reads it, so
//! operators use the convention they know: comma-separated directives,
//! each a level (`error`, `warn`, `info`, `debug`, `trace`, `off`) for
//! every target, or `target=level` for the targets starting with `target`
//! (the longest match wins), as in `warn,ojrunner::spool=trace`. A bare
//! word that is not a level names a target to log in full. Targets no
//! directive names log at `info`, the default. A `RUST_LOG` with a part
//! that cannot be read (`ojrunner=loud`) is ignored as a whole, for the
//! default, and the first line logged says so.
//!
//! The parsing and matching are `env_filter`'s (the filter of env_logger,
//! maintained with it): the same rules as every other Rust program, with
//! none of env_logger's output, which would not be ours.

use env_filter::Filter;
use log::{Level, LevelFilter, Log, Metadata, Record};
use std::io::Write;

struct StderrLog {
    stage: String,
    filter: Filter,
    time: bool,
}

impl Log for StderrLog {
    fn enabled(&self, m: &Metadata) -> bool {
        self.filter.enabled(m)
    }

    fn log(&self, r: &Record) {
        if !self.filter.matches(r) {
            return;
        }
        let level = match r.level() {
            Level::Error => "error",
            Level::Warn => "warn",
            Level::Info => "info",
            Level::Debug => "debug",
            Level::Trace => "trace",
        };
        // One write per line so lines from threads never interleave.
        let line = if self.time {
            let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
            format!("{}.{:03} {level} {}: {}\n", t.as_secs(), t.subsec_millis(), self.stage, r.args())
        } else {
            format!("{level} {}: {}\n", self.stage, r.args())
        };
        let _ = std::io::stderr().lock().write_all(line.as_bytes());
    }

    fn flush(&self) {}
}

/// What is logged when `RUST_LOG` is unset, or ignored.
const DEFAULT: LevelFilter = LevelFilter::Info;

impl StderrLog {
    /// A logger for the program `stage`, filtering by `spec` (`RUST_LOG`),
    /// and why `spec` was ignored, if it was.
    fn new(stage: &str, spec: Option<&str>, time: bool) -> (StderrLog, Option<String>) {
        let mut filter = env_filter::Builder::new();
        filter.filter_level(DEFAULT);
        // try_parse leaves the builder as it was when the spec is refused.
        let refused = spec.and_then(|spec| filter.try_parse(spec).err().map(|e| format!("RUST_LOG={spec:?}: {e}")));
        (StderrLog { stage: stage.to_string(), filter: filter.build(), time }, refused)
    }
}

/// Installs the logger for a program named `stage`. Safe to call twice
/// (the second call changes nothing).
pub fn init(stage: &str) {
    let time = std::env::var_os("OJ_LOG_TIME").is_some_and(|v| v != "0");
    let (log, refused) = StderrLog::new(stage, std::env::var("RUST_LOG").ok().as_deref(), time);
    let level = log.filter.filter();
    if log::set_boxed_logger(Box::new(log)).is_ok() {
        log::set_max_level(level);
        if let Some(why) = refused {
            log::warn!("{why}; ignored, logging at {}", DEFAULT.as_str().to_lowercase());
        }
    }
}

#[cfg(test)]
mod tests {
    use log::{Level, Log};

    /// Whether a logger made for `RUST_LOG=spec` writes a `level` record
    /// of `target`.
    fn writes(spec: &str, target: &str, level: Level) -> bool {
        let (log, _) = super::StderrLog::new("test", Some(spec), false);
        log.enabled(&log::MetadataBuilder::new().target(target).level(level).build())
    }

    /// Each row: `RUST_LOG`, a record's target and level, whether it is written.
    const RULES: &[(&str, &str, Level, bool)] = &[
        // A bare level applies everywhere.
        ("debug", "ojrunner::spool", Level::Debug, true),
        ("debug", "ureq::unit", Level::Debug, true),
        ("debug", "ojrunner::spool", Level::Trace, false),
        ("warn", "ojrunner", Level::Info, false),
        // A word that is no level is a target, logged in full.
        ("ojrunner::spool", "ojrunner::spool", Level::Trace, true),
        ("ojrunner::spool", "ojrunner::claim", Level::Debug, false),
        // A target gets its own level, and the rest the default (info).
        ("ojrunner=debug,ureq=warn", "ojrunner::stage::claimd", Level::Debug, true),
        ("ojrunner=debug,ureq=warn", "ojrunner::stage::claimd", Level::Trace, false),
        ("ojrunner=debug,ureq=warn", "ureq::unit", Level::Warn, true),
        ("ojrunner=debug,ureq=warn", "ureq::unit", Level::Info, false),
        ("ojrunner=debug,ureq=warn", "rusqlite", Level::Info, true),
        ("ojrunner=debug,ureq=warn", "rusqlite", Level::Debug, false),
        // The longest matching target wins over the bare level.
        ("warn,ojrunner::spool=trace", "ojrunner::spool", Level::Trace, true),
        ("warn,ojrunner::spool=trace", "ojrunner::stage::claimd", Level::Info, false),
        ("warn,ojrunner::spool=trace", "ojrunner::stage::claimd", Level::Warn, true),
    ];

    #[test]
    fn levels_apply_per_target_as_env_logger_reads_them() {
        for &(spec, target, level, want) in RULES {
            assert_eq!(writes(spec, target, level), want, "RUST_LOG={spec}: {target} at {level}");
        }
    }

    #[test]
    fn a_spec_that_cannot_be_read_is_ignored_for_the_default() {
        for garbage in ["ojrunner=loud", "a=b=c", "debug/x/y"] {
            assert!(writes(garbage, "ojrunner", Level::Info), "{garbage}");
            assert!(!writes(garbage, "ojrunner", Level::Debug), "{garbage}");
        }
        assert!(super::StderrLog::new("test", Some("ojrunner=loud"), false).1.is_some(), "and said so");
        // Unset or empty: the default.
        assert!(writes("", "ojrunner", Level::Info) && !writes("", "ojrunner", Level::Debug));
        assert!(super::StderrLog::new("test", None, false).1.is_none());
    }
}
