//! `make demo`: a local hub with the example problems, the example
//! submissions, and a runner judging them; then a table of expected versus
//! actual verdicts, and a drain. Exits 0 only if every verdict matches and
//! the drain was clean.

use std::time::Duration;
use testkit::*;

fn main() {
    std::process::exit(run());
}

fn run() -> i32 {
    // The hub's log would drown the table; the runner's goes to a file.
    std::env::set_var("OJ_TEST_QUIET", "1");
    let dir = TempDir::new("demo");
    println!("demo: working in {}", dir.path().display());
    let hub = Hub::start(dir.path(), &[]);
    println!("demo: hubd listening on {}", hub.url);
    let examples = examples();
    let mut problems: Vec<_> = std::fs::read_dir(examples.join("problems"))
        .expect("examples/problems")
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<i64>().ok()).map(|id| (id, e.path())))
        .collect();
    problems.sort();
    for (id, path) in &problems {
        hub.add_problem(*id, path);
    }
    let list: Vec<serde_json::Value> = serde_json::from_str(
        &std::fs::read_to_string(examples.join("submissions.json")).expect("examples/submissions.json"),
    )
    .expect("submissions.json is a JSON list");
    let mut subs = Vec::new();
    use ojrunner::language::Toolchain;
    let languages = ojrunner::language::Languages::builtin();
    for s in &list {
        let lang = languages.by_name(s["language"].as_str().unwrap_or_default());
        if let Some(why) = lang.and_then(|l| l.cannot_judge()) {
            println!("demo: skipped {}: {why}", s["file"].as_str().unwrap_or_default());
            continue;
        }
        let file = examples.join("submissions").join(s["file"].as_str().unwrap());
        let id = hub.submit(s["problem"].as_i64().unwrap(), s["language"].as_str().unwrap(), &file);
        subs.push((id, s));
    }
    println!("demo: {} problems, {} submissions queued; starting runnerd", problems.len(), subs.len());
    let spool = dir.path().join("spool");
    let log = dir.path().join("runner.log");
    let mut runner = start_runner_logged(&hub, &spool, &[], &log);
    let status = hub.wait_all_judged(Duration::from_secs(600));
    println!();
    println!(
        "{:<22} {:>7} {:<8} {:<8} {:<8} {:>5} {:>5}  ok",
        "submission", "problem", "lang", "expect", "actual", "want", "score"
    );
    let mut all_ok = true;
    for (id, s) in &subs {
        let st = status.iter().find(|x| x["submission_id"] == id.as_str()).expect("status of every submission");
        let ok = st["verdict"] == s["expect"] && st["score"] == s["score"] && st["completes"] == 1;
        all_ok &= ok;
        println!(
            "{:<22} {:>7} {:<8} {:<8} {:<8} {:>5} {:>5}  {}",
            s["file"].as_str().unwrap(),
            s["problem"].as_i64().unwrap_or(0),
            s["language"].as_str().unwrap(),
            s["expect"].as_str().unwrap(),
            st["verdict"].as_str().unwrap_or("-"),
            s["score"].as_i64().unwrap_or(0),
            st["score"].as_i64().map_or("-".to_string(), |v| v.to_string()),
            if ok { "yes" } else { "NO" }
        );
    }
    println!();
    println!("demo: draining runnerd (SIGTERM)");
    runner.signal(nix::sys::signal::Signal::SIGTERM);
    let code = runner.wait_exit(Duration::from_secs(120));
    println!("demo: runnerd exited {code}");
    if all_ok && code == 0 {
        println!("demo: every verdict as expected");
        0
    } else {
        println!("demo: FAILED; the runner's log ends:");
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        for l in &lines[lines.len().saturating_sub(40)..] {
            println!("  {l}");
        }
        1
    }
}
