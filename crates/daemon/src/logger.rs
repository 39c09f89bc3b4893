//! One line per event on stderr, as supervisors' loggers (svlogd, s6-log,
//! journald) expect: `LEVEL stage: message`, no colours, no timestamps of
//! our own (the logger adds them; `OJ_LOG_TIME=1` adds ours for bare use).
//!
//! The level comes from `RUST_LOG` (`error`, `warn`, `info`, `debug`,
//! `trace`; default `info`), so operators use the convention they know.

use log::{Level, LevelFilter, Log, Metadata, Record};
use std::io::Write;

struct StderrLog {
    stage: String,
    level: LevelFilter,
    time: bool,
}

impl Log for StderrLog {
    fn enabled(&self, m: &Metadata) -> bool {
        m.level() <= self.level
    }

    fn log(&self, r: &Record) {
        if !self.enabled(r.metadata()) {
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

/// The level `RUST_LOG` asks for: its last bare level word (module filters
/// such as `ojrunner=debug` are read as their level).
pub fn level_from_env() -> LevelFilter {
    let spec = std::env::var("RUST_LOG").unwrap_or_default();
    spec.split(',')
        .filter_map(|part| part.rsplit('=').next())
        .filter_map(|w| w.trim().parse::<LevelFilter>().ok())
        .next_back()
        .unwrap_or(LevelFilter::Info)
}

/// Installs the logger for a program named `stage`. Safe to call twice
/// (the second call changes nothing).
pub fn init(stage: &str) {
    let level = level_from_env();
    let time = std::env::var_os("OJ_LOG_TIME").is_some_and(|v| v != "0");
    if log::set_boxed_logger(Box::new(StderrLog { stage: stage.to_string(), level, time })).is_ok() {
        log::set_max_level(level);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn rust_log_levels_are_read() {
        // Only this test touches RUST_LOG in this binary.
        std::env::set_var("RUST_LOG", "ojrunner=debug");
        assert_eq!(super::level_from_env(), log::LevelFilter::Debug);
        std::env::set_var("RUST_LOG", "warn");
        assert_eq!(super::level_from_env(), log::LevelFilter::Warn);
        std::env::set_var("RUST_LOG", "nonsense");
        assert_eq!(super::level_from_env(), log::LevelFilter::Info);
        std::env::remove_var("RUST_LOG");
    }
}
