//! ojrunner at home on the hosts users run: under systemd, the shipped units
//! are hardened, as `systemd-analyze security` scores them, and the
//! programs' log lines carry the journal's priority when their standard
//! error is the journal; where Normal-OJ's runner ran, its settings that
//! ojrunner ignores are named.

use std::path::Path;
use std::process::Command;
use testkit::*;

/// The highest overall exposure each unit may score (0 safest, 10 least).
/// runnerd needs root, namespaces, mounts and the cgroup tree to make its
/// sandboxes; hubd is a plain HTTP server.
const EXPOSURE: [(&str, f64); 2] = [("runnerd.service", 7.0), ("hubd.service", 3.0)];

/// The number in systemd-analyze's summary line,
/// `→ Overall exposure level for hubd.service: 2.1 OK 🙂`.
fn overall_exposure(out: &str, unit: &str) -> Option<f64> {
    let rest = out.lines().find_map(|l| l.split_once(&format!("Overall exposure level for {unit}: ")))?.1;
    rest.split_whitespace().next()?.parse().ok()
}

#[test]
fn overall_exposure_is_read_from_the_summary_line() {
    let out = "✗ UMask=   Files created by service are world-readable by default   0.1\n\n\
               → Overall exposure level for runnerd.service: 9.6 UNSAFE 😨\n";
    assert_eq!(overall_exposure(out, "runnerd.service"), Some(9.6));
    assert_eq!(overall_exposure(out, "hubd.service"), None);
}

#[test]
fn the_units_are_hardened_as_systemd_analyze_security_scores_them() {
    let Some(analyze) = which("systemd-analyze") else {
        skip("no systemd-analyze (make deps installs systemd)");
        return;
    };
    let mut over = Vec::new();
    for (unit, most) in EXPOSURE {
        let path = repo().join("etc/systemd").join(unit);
        let out = Command::new(&analyze)
            .args(["security", "--offline=true", "--no-pager"])
            .arg(&path)
            .output()
            .expect("run systemd-analyze");
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        let score = overall_exposure(&text, unit)
            .unwrap_or_else(|| panic!("systemd-analyze security {}: no overall exposure in\n{text}", path.display()));
        if score > most {
            over.push(format!("{unit}: {score} (at most {most})\n{text}"));
        }
    }
    assert!(over.is_empty(), "units more exposed than allowed:\n{}", over.join("\n"));
}

/// `program` in PATH, if it is there.
fn which(program: &str) -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join(program)).find(|p| Path::new(p).is_file())
}

/// What `runnerd` with no hub writes to a file standing for its stderr,
/// with `JOURNAL_STREAM` set to what `journal` makes of the file's
/// metadata (`None`: unset).
fn runnerd_stderr(dir: &Path, journal: impl Fn(&std::fs::Metadata) -> Option<String>) -> String {
    let path = dir.join("stderr");
    let file = std::fs::File::create(&path).unwrap();
    let m = file.metadata().unwrap();
    let mut cmd = Command::new(bin("runnerd"));
    cmd.arg("--spool").arg(dir.join("spool")).env_remove("BACKEND_URL").env_remove("RUST_LOG");
    cmd.env_remove("OJ_LOG_TIME").env_remove("JOURNAL_STREAM").stderr(file);
    if let Some(v) = journal(&m) {
        cmd.env("JOURNAL_STREAM", v);
    }
    assert_eq!(cmd.status().unwrap().code(), Some(100), "no BACKEND_URL: exit 100");
    std::fs::read_to_string(&path).unwrap()
}

#[test]
fn log_lines_carry_their_priority_when_stderr_is_the_journal() {
    use std::os::unix::fs::MetadataExt;
    let dir = TempDir::new("units-journal");
    let no_hub = "error runnerd: no hub: set BACKEND_URL";
    // stderr is the stream JOURNAL_STREAM names: `<3>` for an error.
    let out = runnerd_stderr(dir.path(), |m| Some(format!("{}:{}", m.dev(), m.ino())));
    assert!(out.lines().any(|l| l.starts_with(&format!("<3>{no_hub}"))), "{out}");
    assert!(out.lines().all(|l| l.starts_with('<')), "every line: {out}");
    // Unset, or naming another stream (inherited by a child whose stderr
    // went elsewhere): the lines as they are.
    for journal in [None, Some("1:2")] {
        let out = runnerd_stderr(dir.path(), |_| journal.map(String::from));
        assert!(out.lines().any(|l| l.starts_with(no_hub)), "{journal:?}: {out}");
        assert!(!out.lines().any(|l| l.starts_with('<')), "{journal:?}: {out}");
    }
}

/// `program`'s log, its stderr in a file, until `want` is in it; then it
/// is stopped (TERM) and the whole log returned.
fn log_until(mut proc: Proc, log: &Path, want: &str) -> String {
    let limit = std::time::Duration::from_secs(60);
    wait_for(&format!("{want:?} in {}'s log", proc.name), limit, || {
        std::fs::read_to_string(log).ok().filter(|l| l.contains(want)).map(|_| ())
    });
    proc.signal(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(proc.wait_exit(limit), 0, "{} stops cleanly", proc.name);
    std::fs::read_to_string(log).unwrap()
}

#[test]
fn normal_ojs_settings_that_ojrunner_ignores_are_named_once_at_start() {
    let dir = TempDir::new("units-normal-oj");
    let hub = Hub::start(dir.path(), &[]);
    let spool = dir.path().join("spool");
    let set = [("TESTDATA_ROOT", "sandbox-testdata"), ("REDIS_URL", "redis://:secret@redis:6379/14")];
    let testdata = format!(
        "TESTDATA_ROOT is Normal-OJ's and ignored here; ojrunner uses the per-host testdata cache in {}/testdata",
        spool.display()
    );

    // runnerd names each once, and starts its stages without them.
    let log = dir.path().join("runnerd.log");
    let runner = start_runner_logged(&hub, &spool, &set, &log);
    let out = log_until(runner, &log, "runnerd: ready");
    assert_eq!(out.matches("is Normal-OJ's and ignored").count(), 2, "once each:\n{out}");
    assert!(out.contains(&format!("warn runnerd: {testdata}")), "{out}");
    assert!(out.contains("warn runnerd: REDIS_URL is Normal-OJ's and ignored here; ojrunner uses no Redis"), "{out}");
    assert!(!out.contains("secret"), "no value is shown: {out}");

    // A stage started alone names them itself.
    let log = dir.path().join("claimd.log");
    let mut cmd = Command::new(bin("claimd"));
    cmd.envs(runner_env(&hub, &spool)).envs(set).stderr(std::fs::File::create(&log).unwrap());
    let claimd = Proc::of(cmd.spawn().unwrap(), "claimd", None);
    let out = log_until(claimd, &log, "REDIS_URL is Normal-OJ's");
    assert!(out.contains(&format!("warn claimd: {testdata}")), "{out}");
}
