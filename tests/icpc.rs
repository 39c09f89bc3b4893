//! The ICPC problem package format: its output validators (checker `icpc`)
//! and interactors (`icpc-interactive`) judged through the real sandbox,
//! written here to the format's interface (`validator input answer
//! feedback_dir [flags]`, exit 42 AC, 43 WA); and a package directory read
//! by `hubd problem add` and `judge-exec run`, judged end to end. Fixtures
//! are in `tests/icpc/`.
//!
//! Run as root (programs run as slot uids 60080–60089, validators as their
//! auxiliary uids 61080–61089).

use ojrunner::judge::CaseRun;
use ojrunner::protocol::Verdict;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use testkit::{judge_cases, judge_exec_run, repo, testdata_dir, TempDir};

fn fixture(name: &str) -> PathBuf {
    repo().join("tests/icpc").join(name)
}

fn read_fixture(name: &str) -> String {
    std::fs::read_to_string(fixture(name)).unwrap()
}

/// A testdata directory as a runner unpacks one (root-only): cases
/// `00CC.in`/`00CC.out`, and `extra` files (a relative name, its text).
fn testdata(work: &Path, cases: &[(&str, &str)], extra: &[(&str, String)]) -> PathBuf {
    let extra: Vec<(&str, Vec<u8>)> = extra.iter().map(|(name, text)| (*name, text.clone().into_bytes())).collect();
    testdata_dir(work, cases, &extra)
}

/// Judges the c11 `source` on every case of `td` with the checker `name`,
/// as worker `slot` would.
fn judge(work: &Path, source: &str, td: &Path, name: &str, slot: usize) -> Vec<CaseRun> {
    judge_cases(work, "c11", source, td, Some(name), 1000, slot)
}

fn statuses(runs: &[CaseRun]) -> Vec<Verdict> {
    runs.iter().map(|r| r.result.status).collect()
}

/// The sum problem's cases: 5 (the program's -1 6 sums right, where the
/// answer says 2 3), 7 (its 3 3 does not), 0 (the validator refuses the
/// input), 9 (the validator plants a link as its message).
const SUM_CASES: [(&str, &str); 4] = [("5\n", "2 3\n"), ("7\n", "3 4\n"), ("0\n", "0 0\n"), ("9\n", "4 5\n")];

#[test]
fn an_output_validator_judges_by_42_and_43_and_its_judgemessage_is_the_cases_message() {
    let work = TempDir::new("icpc-validator");
    let td = testdata(
        work.path(),
        &SUM_CASES,
        &[("icpc/validator.c", read_fixture("sum/output_validators/sum/sum_validator.c"))],
    );
    let runs = judge(work.path(), &read_fixture("sum.c"), &td, "icpc", 80);
    // A right answer the diff checker would refuse: the validator decides.
    assert_eq!(statuses(&runs), [Verdict::AC, Verdict::WA, Verdict::JE, Verdict::WA]);
    let message = |i: usize| runs[i].result.stderr.clone();
    assert!(message(0).contains("ok: -1 + 6"), "{:?}", message(0));
    assert!(message(1).contains("sum of 3 and 3 is wrong"), "{:?}", message(1));
    assert_eq!(runs[1].result.stdout, "3 3\n", "the program's output is kept as it is");
    // Exit 1: the validator's failure is the judge's, with what it said.
    assert!(message(2).contains("validator failed (exit 1)") && message(2).contains("bad input"), "{:?}", message(2));
    // A link in the feedback directory is never followed by the judge.
    assert!(!message(3).contains("root:"), "{:?}", message(3));
    assert!(message(3).contains("judgemessage.txt is not a regular file"), "{:?}", message(3));
}

#[test]
fn validator_flags_shipped_with_the_validator_are_its_arguments() {
    let work = TempDir::new("icpc-flags");
    let extra = [
        ("icpc/validator.c", read_fixture("sum/output_validators/sum/sum_validator.c")),
        ("icpc/validator_flags", "nonnegative\n".into()),
    ];
    let td = testdata(work.path(), &SUM_CASES[..1], &extra);
    let runs = judge(work.path(), &read_fixture("sum.c"), &td, "icpc", 81);
    assert_eq!(statuses(&runs), [Verdict::WA]);
    assert!(runs[0].result.stderr.contains("negative: -1 6"), "{:?}", runs[0].result.stderr);
}

/// A program that asks "? 1" forever without reading an answer.
const FLOOD: &str = "#include <stdio.h>\nint main(void){for(;;)printf(\"? 1\\n\");}\n";

/// A program that reads N and crashes.
const CRASH: &str = "#include <stdio.h>\nint main(void){long n;scanf(\"%ld\",&n);return 3;}\n";

#[test]
fn an_interactor_talks_to_the_program_and_judges_by_42_and_43() {
    let work = TempDir::new("icpc-interactor");
    let extra = [("icpc/validator.c", read_fixture("guess/output_validators/guess/guess_validator.c"))];
    let td = testdata(work.path(), &[("100 37\n", "37\n"), ("oops\n", "0\n")], &extra);
    let guess = |name: &str| std::fs::read_to_string(repo().join("tests/checkers").join(name)).unwrap();
    let at = |w: &str| {
        let p = work.path().join(w);
        std::fs::create_dir(&p).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    };
    let ok = judge(&at("ok"), &guess("guess_ok.c"), &td, "icpc-interactive", 82);
    // The second case's input is no game: the validator fails, and the
    // program, never spoken to, with it; the judge's fault.
    assert_eq!(statuses(&ok), [Verdict::AC, Verdict::JE], "{ok:?}");
    assert!(ok[0].result.stderr.contains("[validator] found in 3 queries"), "{:?}", ok[0].result.stderr);
    assert!(
        ok[1].result.stderr.contains("validator failed (exit 1)") && ok[1].result.stderr.contains("bad input"),
        "{ok:?}"
    );
    let wrong = judge(&at("wrong"), &guess("guess_wrong.c"), &td, "icpc-interactive", 82);
    assert_eq!(wrong[0].result.status, Verdict::WA);
    assert!(wrong[0].result.stderr.contains("[validator] guessed 1"), "{:?}", wrong[0].result.stderr);
    // The validator stops reading a dialogue gone wrong; the program's next
    // write kills it (SIGPIPE): the validator's WA, not the program's RE.
    let flood = judge(&at("flood"), FLOOD, &td, "icpc-interactive", 82);
    assert_eq!(flood[0].result.status, Verdict::WA, "{flood:?}");
    assert!(flood[0].result.stderr.contains("more than 30 queries"), "{:?}", flood[0].result.stderr);
    // A program that crashes is RE, whatever the validator then says.
    let crash = judge(&at("crash"), CRASH, &td, "icpc-interactive", 82);
    assert_eq!(crash[0].result.status, Verdict::RE, "{crash:?}");
    assert!(crash[0].result.stderr.contains("no answer after 0 queries"), "{:?}", crash[0].result.stderr);
}

/// `hubd --db DB problem add --id ID DIR`: its exit status and stderr.
fn problem_add(db: &Path, id: i64, dir: &Path) -> (bool, String) {
    let out = std::process::Command::new(testkit::bin("hubd"))
        .arg("--db")
        .arg(db)
        .args(["problem", "add", "--id", &id.to_string()])
        .arg(dir)
        .output()
        .unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn a_package_added_by_hubd_is_judged_end_to_end_by_its_validator() {
    let dir = TempDir::new("icpc-e2e");
    let hub = testkit::Hub::start(dir.path(), &[]);
    hub.add_problem(1, &fixture("sum"));
    let ok = hub.submit(1, "c11", &fixture("sum_ok.c"));
    let negative = hub.submit(1, "c11", &fixture("sum.c"));
    let mut runner = testkit::start_runner(&hub, &dir.path().join("spool"), &[]);
    hub.wait_all_judged(std::time::Duration::from_secs(300));
    let ok = hub.submission(&ok);
    // Right where the answers' pairs differ: the validator judged, with the
    // package's flags; the samples are a task worth nothing, the secret
    // cases (a nested group among them) one worth 100.
    assert_eq!((ok["verdict"].as_str(), ok["score"].as_i64()), (Some("AC"), Some(100)), "{ok}");
    assert_eq!(ok["tasks"].as_array().map(Vec::len), Some(2), "{ok}");
    assert_eq!(ok["tasks"][1]["cases"].as_array().map(Vec::len), Some(3), "{ok}");
    let case = &ok["tasks"][1]["cases"][2];
    assert!(case["stderr"].as_str().unwrap_or("").contains("[validator] ok: 1 + 999999"), "{case}");
    let negative = hub.submission(&negative);
    assert_eq!((negative["verdict"].as_str(), negative["score"].as_i64()), (Some("WA"), Some(0)), "{negative}");
    let sample = &negative["tasks"][0]["cases"][0];
    assert!(sample["stderr"].as_str().unwrap_or("").contains("negative: -1 6"), "{sample}");
    runner.signal(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(runner.wait_exit(std::time::Duration::from_secs(60)), 0);
}

#[test]
fn hubd_problem_add_refuses_a_package_by_the_key_it_cannot_carry() {
    let dir = TempDir::new("icpc-refused");
    let db = dir.path().join("hub.db");
    let package = dir.path().join("scoring");
    let copy = std::process::Command::new("cp").arg("-r").arg(fixture("sum")).arg(&package).status().unwrap();
    assert!(copy.success());
    let yaml = std::fs::read_to_string(package.join("problem.yaml")).unwrap();
    std::fs::write(package.join("problem.yaml"), yaml.replace("type: pass-fail", "type: scoring")).unwrap();
    let (ok, stderr) = problem_add(&db, 3, &package);
    assert!(!ok && stderr.contains("problem 3") && stderr.contains("type: scoring"), "{stderr}");
    std::fs::write(package.join("problem.yaml"), yaml.replace("memory: 256", "memory: 256\n  output: 8")).unwrap();
    let (ok, stderr) = problem_add(&db, 3, &package);
    assert!(!ok && stderr.contains("limits.output"), "{stderr}");
    let validator = package.join("output_validators/sum");
    std::fs::rename(validator.join("sum_validator.c"), validator.join("sum_validator.py")).unwrap();
    std::fs::write(package.join("problem.yaml"), &yaml).unwrap();
    let (ok, stderr) = problem_add(&db, 3, &package);
    assert!(!ok && stderr.contains("output_validators/sum/sum_validator.py: a validator in Python"), "{stderr}");
    // Nothing of them was stored; the package itself is, with its checker.
    let (ok, stderr) = problem_add(&db, 4, &fixture("sum"));
    assert!(ok, "{stderr}");
    let conn = rusqlite::Connection::open(&db).unwrap();
    let stored: Vec<(i64, Option<String>)> = conn
        .prepare("SELECT id, checker FROM problems ORDER BY id")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(stored, [(4, Some("icpc".to_string()))]);
}

#[test]
fn judge_exec_run_judges_a_package_directory_as_hubd_maps_it() {
    let (code, lines, err) = judge_exec_run(&fixture("sum_ok.c"), &fixture("sum"), &[]);
    assert_eq!(code, 0, "{lines:?} {err}");
    let cases: Vec<(&str, &str, i64)> = lines[..4]
        .iter()
        .map(|l| (l["case"].as_str().unwrap(), l["status"].as_str().unwrap(), l["task"].as_i64().unwrap()))
        .collect();
    assert_eq!(
        cases,
        [
            ("data/sample/1", "AC", 0),
            ("data/secret/1", "AC", 1),
            ("data/secret/2", "AC", 1),
            ("data/secret/big/1", "AC", 1)
        ]
    );
    assert!(lines[3]["stderr"].as_str().unwrap().contains("[validator] ok: 1 + 999999"), "{}", lines[3]);
    assert_eq!((lines[4]["summary"].as_bool(), lines[4]["cases"].as_i64()), (Some(true), Some(4)));
    // The package's flags went with its validator.
    let (code, lines, err) = judge_exec_run(&fixture("sum.c"), &fixture("sum"), &[]);
    assert_eq!(code, 1, "{lines:?} {err}");
    assert_eq!(lines[0]["status"], "WA");
    assert!(lines[0]["stderr"].as_str().unwrap().contains("negative: -1 6"), "{}", lines[0]);
    // A checker named on the command line wins over the package's.
    let (code, lines, _) = judge_exec_run(&fixture("sum_ok.c"), &fixture("sum"), &["--checker", "diff"]);
    assert_eq!((code, lines[0]["status"].as_str()), (1, Some("WA")));
}

#[test]
fn judge_exec_run_refuses_a_package_by_the_key_it_cannot_carry() {
    let dir = TempDir::new("icpc-run-refused");
    let package = dir.path().join("sum");
    assert!(std::process::Command::new("cp").arg("-r").arg(fixture("sum")).arg(&package).status().unwrap().success());
    std::fs::remove_file(package.join(".timelimit")).unwrap();
    let (code, _, err) = judge_exec_run(&fixture("sum_ok.c"), &package, &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("no time limit"), "{err}");
    // Given on the command line, it is the package's.
    let (code, lines, err) = judge_exec_run(&fixture("sum_ok.c"), &package, &["--time", "500"]);
    assert_eq!(code, 0, "{lines:?} {err}");
    std::fs::write(package.join("problem.yaml"), "validation: custom\ntype: scoring\n").unwrap();
    let (code, _, err) = judge_exec_run(&fixture("sum_ok.c"), &package, &["--time", "500"]);
    assert!(code == 2 && err.contains("type: scoring"), "{err}");
}

#[test]
fn judge_exec_run_judges_an_interactive_package() {
    let guess = |name: &str| repo().join("tests/checkers").join(name);
    let (code, lines, err) = judge_exec_run(&guess("guess_ok.c"), &fixture("guess"), &[]);
    assert_eq!(code, 0, "{lines:?} {err}");
    let statuses: Vec<&str> = lines[..3].iter().map(|l| l["status"].as_str().unwrap()).collect();
    assert_eq!(statuses, ["AC", "AC", "AC"]);
    assert!(lines[2]["stderr"].as_str().unwrap().contains("[validator] found in 29 queries"), "{}", lines[2]);
    let (code, lines, _) = judge_exec_run(&guess("guess_wrong.c"), &fixture("guess"), &[]);
    assert_eq!((code, lines[1]["status"].as_str(), lines[1]["case"].as_str()), (1, Some("WA"), Some("data/secret/1")));
}
