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
//! One record is one line, whatever it carries: the whole message is
//! escaped here, once, so no call site can forget a value from outside (a
//! job id, a hub's error body, a name from a zip). A newline is written
//! `\n`, a carriage return `\r`, a tab `\t`, and every other control
//! character (C0, DEL, C1, so an ANSI escape's ESC too) and the Unicode
//! line and paragraph separators as `\u{..}`; nothing else changes.
//!
//! When standard error is the journal (`JOURNAL_STREAM`, set by systemd,
//! names its device and inode, as systemd.exec(5) says), each line starts
//! with its priority as sd-daemon(3) writes it (`<3>` error, `<4>` warn,
//! `<6>` info, `<7>` debug and trace), so that `journalctl -p err` finds
//! the errors. Elsewhere a line has no such prefix.
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
    /// Standard error is the journal: lines start with their priority.
    journal: bool,
}

/// sd-daemon(3)'s priority of a level (`SD_ERR` .. `SD_DEBUG`).
fn priority(level: Level) -> u8 {
    match level {
        Level::Error => 3,
        Level::Warn => 4,
        Level::Info => 6,
        Level::Debug | Level::Trace => 7,
    }
}

/// `msg` on one line, its control characters escaped (see the module doc).
pub fn escape(msg: &str) -> std::borrow::Cow<'_, str> {
    let odd = |c: char| c.is_control() || c == '\u{2028}' || c == '\u{2029}';
    if !msg.contains(odd) {
        return std::borrow::Cow::Borrowed(msg);
    }
    let mut out = String::with_capacity(msg.len() + 16);
    for c in msg.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if odd(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// One line as written: `[<N>][secs.millis ]level stage: message\n`, the
/// stage and message escaped ([`escape`]).
fn format_line(journal: bool, time: Option<std::time::Duration>, level: Level, stage: &str, msg: &str) -> String {
    let (stage, msg) = (escape(stage), escape(msg));
    let name = level.as_str().to_lowercase();
    let prio = if journal { format!("<{}>", priority(level)) } else { String::new() };
    match time {
        Some(t) => format!("{prio}{}.{:03} {name} {stage}: {msg}\n", t.as_secs(), t.subsec_millis()),
        None => format!("{prio}{name} {stage}: {msg}\n"),
    }
}

/// `JOURNAL_STREAM`'s `<dev>:<inode>`, both decimal.
fn journal_stream(value: &str) -> Option<(u64, u64)> {
    let (dev, ino) = value.split_once(':')?;
    Some((dev.parse().ok()?, ino.parse().ok()?))
}

/// Whether standard error is the stream `JOURNAL_STREAM` names: its
/// `st_dev` and `st_ino` match (a child given another stderr has the
/// variable but not the stream).
fn stderr_is_journal(value: Option<&str>) -> bool {
    use std::os::fd::AsFd;
    use std::os::unix::fs::MetadataExt;
    let Some(want) = value.and_then(journal_stream) else { return false };
    let Ok(fd) = std::io::stderr().as_fd().try_clone_to_owned() else { return false };
    std::fs::File::from(fd).metadata().is_ok_and(|m| (m.dev(), m.ino()) == want)
}

impl Log for StderrLog {
    fn enabled(&self, m: &Metadata) -> bool {
        self.filter.enabled(m)
    }

    fn log(&self, r: &Record) {
        if !self.filter.matches(r) {
            return;
        }
        let time =
            self.time.then(|| std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default());
        // One write per line so lines from threads never interleave.
        let line = format_line(self.journal, time, r.level(), &self.stage, &r.args().to_string());
        let _ = std::io::stderr().lock().write_all(line.as_bytes());
    }

    fn flush(&self) {}
}

/// What is logged when `RUST_LOG` is unset, or ignored.
const DEFAULT: LevelFilter = LevelFilter::Info;

impl StderrLog {
    /// A logger for the program `stage`, filtering by `spec` (`RUST_LOG`),
    /// and why `spec` was ignored, if it was.
    fn new(stage: &str, spec: Option<&str>, time: bool, journal: bool) -> (StderrLog, Option<String>) {
        let mut filter = env_filter::Builder::new();
        filter.filter_level(DEFAULT);
        // try_parse leaves the builder as it was when the spec is refused.
        let refused = spec.and_then(|spec| filter.try_parse(spec).err().map(|e| format!("RUST_LOG={spec:?}: {e}")));
        (StderrLog { stage: stage.to_string(), filter: filter.build(), time, journal }, refused)
    }
}

/// Installs the logger for a program named `stage`. Safe to call twice
/// (the second call changes nothing).
pub fn init(stage: &str) {
    let time = std::env::var_os("OJ_LOG_TIME").is_some_and(|v| v != "0");
    let journal = stderr_is_journal(std::env::var("JOURNAL_STREAM").ok().as_deref());
    let (log, refused) = StderrLog::new(stage, std::env::var("RUST_LOG").ok().as_deref(), time, journal);
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
        let (log, _) = super::StderrLog::new("test", Some(spec), false, false);
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
    fn lines_start_with_the_journal_priority_only_for_the_journal() {
        use std::time::Duration;
        let line = |journal, level| super::format_line(journal, None, level, "claimd", "m");
        assert_eq!(line(false, Level::Error), "error claimd: m\n");
        assert_eq!(line(true, Level::Error), "<3>error claimd: m\n");
        assert_eq!(line(true, Level::Warn), "<4>warn claimd: m\n");
        assert_eq!(line(true, Level::Info), "<6>info claimd: m\n");
        assert_eq!(line(true, Level::Debug), "<7>debug claimd: m\n");
        assert_eq!(line(true, Level::Trace), "<7>trace claimd: m\n");
        let t = Some(Duration::from_millis(1_700_000_000_042));
        assert_eq!(super::format_line(false, t, Level::Warn, "x", "m"), "1700000000.042 warn x: m\n");
        assert_eq!(super::format_line(true, t, Level::Warn, "x", "m"), "<4>1700000000.042 warn x: m\n");
    }

    #[test]
    fn a_record_is_one_line_whatever_its_message_holds() {
        let forged = "jb_1\nerror reportd: forged\r\n\u{1b}[2J\u{1b}]0;t\u{7}\ttab\u{85}\u{2028}\u{7f}";
        let line = super::format_line(false, None, Level::Info, "claimd", &format!("job {forged} claimed"));
        assert_eq!(
            line,
            "info claimd: job jb_1\\nerror reportd: forged\\r\\n\\u{1b}[2J\\u{1b}]0;t\\u{7}\\ttab\\u{85}\\u{2028}\\u{7f} claimed\n"
        );
        assert_eq!(line.lines().count(), 1);
        assert!(!line.trim_end_matches('\n').contains(|c: char| c.is_control()), "{line:?}");
        let plain = "job jb_1 \"quoted\" \\ é 日本 claimed";
        assert_eq!(super::escape(plain), plain, "printable text, backslashes and non-ASCII are kept");
    }

    #[test]
    fn journal_stream_is_a_decimal_device_and_inode() {
        assert_eq!(super::journal_stream("8:1234"), Some((8, 1234)));
        assert_eq!(super::journal_stream("0:0"), Some((0, 0)));
        for bad in ["", "8", "8:", ":1234", "8:12:34", "0x8:1234", "8:-1", " 8:1234"] {
            assert_eq!(super::journal_stream(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn stderr_is_the_journal_only_when_device_and_inode_match() {
        use std::os::fd::AsFd;
        use std::os::unix::fs::MetadataExt;
        let fd = std::io::stderr().as_fd().try_clone_to_owned().unwrap();
        let m = std::fs::File::from(fd).metadata().unwrap();
        assert!(super::stderr_is_journal(Some(&format!("{}:{}", m.dev(), m.ino()))));
        assert!(!super::stderr_is_journal(Some(&format!("{}:{}", m.dev(), m.ino() + 1))));
        assert!(!super::stderr_is_journal(Some(&format!("{}:{}", m.dev() + 1, m.ino()))));
        assert!(!super::stderr_is_journal(Some("garbage")));
        assert!(!super::stderr_is_journal(None));
    }

    #[test]
    fn a_spec_that_cannot_be_read_is_ignored_for_the_default() {
        for garbage in ["ojrunner=loud", "a=b=c", "debug/x/y"] {
            assert!(writes(garbage, "ojrunner", Level::Info), "{garbage}");
            assert!(!writes(garbage, "ojrunner", Level::Debug), "{garbage}");
        }
        assert!(super::StderrLog::new("test", Some("ojrunner=loud"), false, false).1.is_some(), "and said so");
        // Unset or empty: the default.
        assert!(writes("", "ojrunner", Level::Info) && !writes("", "ojrunner", Level::Debug));
        assert!(super::StderrLog::new("test", None, false, false).1.is_none());
    }
}
