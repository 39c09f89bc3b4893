//! The ICPC problem package format: its output validators (checker `icpc`)
//! and interactors (`icpc-interactive`) judged through the real sandbox,
//! written here to the format's interface (`validator input answer
//! feedback_dir [flags]`, exit 42 AC, 43 WA); and a package directory read
//! by `hubd problem add` and `judge-exec run`, judged end to end. Fixtures
//! are in `tests/icpc/`.
//!
//! Run as root (programs run as slot uids 60080–60089, validators as their
//! auxiliary uids 61080–61089).

use ojrunner::judge::{Case, CaseRun, Compiled, Judge, Slot, Submission};
use ojrunner::language::Languages;
use ojrunner::protocol::{Task, Verdict};
use ojrunner::workspace::Workspace;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use testkit::{repo, source_dir, TempDir};

fn fixture(name: &str) -> PathBuf {
    repo().join("tests/icpc").join(name)
}

fn read_fixture(name: &str) -> String {
    std::fs::read_to_string(fixture(name)).unwrap()
}

/// A testdata directory as a runner unpacks one (root-only): cases
/// `00CC.in`/`00CC.out`, and `extra` files (a relative name, its text).
fn testdata(work: &Path, cases: &[(&str, &str)], extra: &[(&str, String)]) -> PathBuf {
    let dir = work.join("testdata");
    std::fs::create_dir(&dir).unwrap();
    for (c, (input, answer)) in cases.iter().enumerate() {
        std::fs::write(dir.join(format!("00{c:02}.in")), input).unwrap();
        std::fs::write(dir.join(format!("00{c:02}.out")), answer).unwrap();
    }
    for (name, text) in extra {
        let p = dir.join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    dir
}

/// Judges the c11 `source` on every case of `td` with the checker `name`,
/// as worker `slot` would.
fn judge(work: &Path, source: &str, td: &Path, name: &str, slot: usize) -> Vec<CaseRun> {
    let j = Judge::default();
    let langs = Languages::builtin();
    let lang = langs.by_name("c11").unwrap();
    let slot = Slot::for_index(slot);
    let checker =
        j.prepare_checker(Some(name), td, &work.join("cache"), &slot).unwrap_or_else(|e| panic!("{name}: {e}"));
    let src = source_dir(work, &lang.source, source);
    let src = Workspace::stage(&src).unwrap();
    assert_eq!(j.compile(lang, &src, &slot), Compiled::Ready);
    let count = std::fs::read_dir(td)
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().extension().is_some_and(|x| x == "in"))
        .count();
    let task = Task { task_score: 100, memory_limit: 65536, time_limit: 1000, case_count: count as i64 };
    (0..count)
        .map(|c| {
            let scratch = work.join("cases").join(format!("00{c:02}"));
            std::fs::create_dir_all(&scratch).unwrap();
            let (input, answer) = (td.join(format!("00{c:02}.in")), td.join(format!("00{c:02}.out")));
            let sub = Submission { lang, src: &src, tasks: std::slice::from_ref(&task), checker: &checker };
            j.run_case(&sub, &Case { task: 0, case: c, input, answer }, &slot, &scratch)
        })
        .collect()
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
    let td = testdata(work.path(), &SUM_CASES, &[("icpc/validator.c", read_fixture("sum_validator.c"))]);
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
    let extra =
        [("icpc/validator.c", read_fixture("sum_validator.c")), ("icpc/validator_flags", "nonnegative\n".into())];
    let td = testdata(work.path(), &SUM_CASES[..1], &extra);
    let runs = judge(work.path(), &read_fixture("sum.c"), &td, "icpc", 81);
    assert_eq!(statuses(&runs), [Verdict::WA]);
    assert!(runs[0].result.stderr.contains("negative: -1 6"), "{:?}", runs[0].result.stderr);
}
