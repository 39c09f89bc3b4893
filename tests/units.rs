//! ojrunner at home under systemd: the shipped units are hardened, as
//! `systemd-analyze security` scores them.

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
