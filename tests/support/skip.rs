//! A test that cannot run here (no root, no tool) says so and returns: the
//! harness counts it as passed, so each skip is also written down, where
//! `make test`'s last line counts it.

use super::layout::{repo, suite};

/// Says that the calling test is skipped, and why (it then returns: the
/// harness counts it as passed). Each skip is also a line of
/// `target/test-logs/skipped.log`, which `make test` counts and names in
/// its last line, so a skip is never taken for a pass.
pub fn skip(why: &str) {
    use std::io::Write;
    let test = std::thread::current().name().unwrap_or("?").to_string();
    let suite = suite();
    eprintln!("skipped: {why}");
    let log = repo().join("target/test-logs");
    let _ = std::fs::create_dir_all(&log);
    if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(log.join("skipped.log")) {
        let _ = writeln!(f, "{suite}::{test}: {why}");
    }
}

/// Whether the tests run as root: the sandbox's namespaces, cgroups and
/// slot uids need it.
pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}
