//! ojrunner at home under systemd: the shipped units are hardened, as
//! `systemd-analyze security` scores them, and the programs' log lines carry
//! the journal's priority when their standard error is the journal.

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
        println!("skipped: no systemd-analyze");
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
