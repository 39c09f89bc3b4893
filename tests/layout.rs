//! The workspace's layout, seen in the built binaries (issue 15): the
//! reference hub carries none of the sandbox, and the runner's programs
//! carry no hub server. Read from the binaries themselves (`nm` for the
//! code linked in, `readelf` for the names their debug info describes, the
//! parts the linker dropped included), so what is checked is what ships,
//! not what the manifests claim.

use std::process::Command;
use testkit::*;

/// The runner's programs.
const RUNNER: [&str; 5] = ["claimd", "judge-exec", "reportd", "leased", "runnerd"];

/// The sandbox's module path, as it appears in demangled names: the helper
/// and its pool, the jail, the seccomp filter all live under it.
const SANDBOX: [&str; 1] = ["ojrunner::sandbox::"];

/// Crate paths of a hub server: the hub crate and its HTTP server.
const HUB_SERVER: [&str; 2] = ["ojrunner_hub::", "hyper::server::"];

/// What `tool args… program` prints, for the built `program`.
fn read(tool: &str, args: &[&str], program: &str) -> String {
    let out = Command::new(tool)
        .args(args)
        .arg(bin(program))
        .output()
        .unwrap_or_else(|e| panic!("running {tool} (binutils) on {program}: {e}"));
    assert!(out.status.success(), "{tool} {program}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The names in the built `program`: its symbols, demangled (`nm`), and
/// the strings of its debug info (`readelf`), where a module linked in
/// shows even when none of its functions was kept.
fn symbols(program: &str) -> Vec<String> {
    let nm = read("nm", &["--demangle"], program);
    let debug = read("readelf", &["--string-dump=.debug_str"], program);
    // nm: `ADDRESS TYPE NAME`; readelf: `[ OFFSET]  STRING`.
    let code = nm.lines().filter_map(|l| l.splitn(3, ' ').nth(2));
    let described = debug.lines().filter_map(|l| l.split_once("]  ").map(|(_, s)| s));
    code.chain(described).map(str::to_string).collect()
}

/// The symbols of `program` under any of `paths`, at most a few of each.
fn symbols_under(program: &str, paths: &[&str]) -> Vec<String> {
    let all = symbols(program);
    assert!(!all.is_empty(), "{program} has no symbols: a stripped build cannot show its layout");
    paths.iter().flat_map(|p| all.iter().filter(|s| s.contains(p)).take(3).cloned().collect::<Vec<_>>()).collect()
}

#[test]
fn hubd_carries_no_sandbox() {
    let found = symbols_under("hubd", &SANDBOX);
    assert!(found.is_empty(), "hubd links the sandbox:\n{}", found.join("\n"));
}

#[test]
fn the_runner_carries_no_hub_server() {
    for program in RUNNER {
        let found = symbols_under(program, &HUB_SERVER);
        assert!(found.is_empty(), "{program} links a hub server:\n{}", found.join("\n"));
    }
}
