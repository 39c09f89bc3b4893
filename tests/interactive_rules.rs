//! The verdict of an interactive case in each order of events (issue #24),
//! through the real sandbox: the program and the interactor
//! (`tests/interactive_rules/interactor.c`, told how to talk by the case's
//! input) each in its own slot, joined by two pipes, judged by `Judge` and
//! by `judge-exec run`. The rules are `verdict::interactive`'s:
//!
//! - a program that leaves early is its own fault: the interactor, whose
//!   next write would meet a closed pipe, never dies of it (no JE);
//! - the side that ended first decides: an interactor that had already said
//!   WA, or failed, before the program died or ran out of time makes the
//!   case WA, or JE.
//!
//! - the idleness rule is the dialogue's: a deadlock (both sides reading)
//!   is TLE `idle` soon after the time limit, a program waiting on a busy
//!   interactor is not idle.
//!
//! Run as root (programs run as slot uids 90–99 above the base, the
//! interactors as their auxiliary uids).

use ojrunner::judge::CaseRun;
use ojrunner::protocol::Verdict;
use std::path::{Path, PathBuf};
use testkit::{judge_cases, judge_exec_run, repo, testdata_dir, TempDir};

fn interactor() -> PathBuf {
    repo().join("tests/interactive_rules/interactor.c")
}

/// A testdata directory (root-only, as claimd makes them) under `work`: a
/// case per mode of the interactor, and the interactor.
fn testdata(work: &Path, modes: &[&str]) -> PathBuf {
    let inputs: Vec<String> = modes.iter().map(|mode| format!("{mode}\n")).collect();
    let cases: Vec<(&str, &str)> = inputs.iter().map(|i| (i.as_str(), "ok\n")).collect();
    testdata_dir(work, &cases, &[("interactor.c", std::fs::read(interactor()).unwrap())])
}

/// Judges `source` in `lang` against the interactor, a case per mode, as
/// worker `slot` would, with a time limit of `time` ms.
fn judge(tag: &str, lang: &str, source: &str, modes: &[&str], time: i64, slot: usize) -> Vec<CaseRun> {
    let work = TempDir::new(tag);
    let td = testdata(work.path(), modes);
    judge_cases(work.path(), lang, source, &td, Some("interactive"), time, slot)
}

/// [`judge`], the verdicts of its cases asserted to be `want`.
fn judged_to(
    want: &[Verdict],
    tag: &str,
    lang: &str,
    source: &str,
    modes: &[&str],
    time: i64,
    slot: usize,
) -> Vec<CaseRun> {
    let runs = judge(tag, lang, source, modes, time, slot);
    assert_eq!(statuses(&runs), want, "{tag}: {runs:?}");
    runs
}

fn statuses(runs: &[CaseRun]) -> Vec<Verdict> {
    runs.iter().map(|r| r.result.status).collect()
}

/// Leaves before reading a byte.
const LEAVES: &str = "int main(void) { return 0; }\n";
/// Reads a line, answers "ok", leaves.
const ANSWERS_OK: &str = "#include <stdio.h>\n\
    int main(void) { char b[64]; if (!fgets(b, sizeof b, stdin)) return 1; puts(\"ok\"); return 0; }\n";
/// Says "ok", then reads to the end of its input: what follows (`THEN`)
/// happens only once the interactor has gone.
const OK_THEN: &str = "#include <stdio.h>\n#include <stdlib.h>\n\
    int main(void) { puts(\"ok\"); fflush(stdout); while (getchar() != EOF) {} THEN; }\n";
/// Reads to the end of its input, saying nothing, then `THEN`.
const SILENT_THEN: &str = "#include <stdio.h>\n#include <stdlib.h>\n\
    int main(void) { while (getchar() != EOF) {} THEN; }\n";

fn then(program: &str, what: &str) -> String {
    program.replace("THEN", what)
}

const CRASH: &str = "abort()";
const SPIN: &str = "for (volatile unsigned long i = 0;; i++) {}";

#[test]
fn a_program_that_leaves_early_is_wa_never_je() {
    // flood: the interactor's first megabyte meets a pipe nobody will read;
    // late: it reads the program's end, then writes.
    judged_to(&[Verdict::WA, Verdict::WA], "irules-early", "c11", LEAVES, &["flood", "late"], 1000, 90);
}

#[test]
fn an_interactor_that_says_more_after_a_right_answer_leaves_it_ac() {
    // The program answers and leaves; the interactor's farewell (1 MiB) is
    // never read by anyone.
    judged_to(&[Verdict::AC; 2], "irules-farewell", "c11", ANSWERS_OK, &["farewell", "farewell"], 1000, 91);
    let python = "input()\nprint('ok')\n";
    judged_to(&[Verdict::AC; 2], "irules-farewell-py", "python3", python, &["farewell", "farewell"], 2000, 92);
}

#[test]
fn an_interactor_that_said_wa_first_makes_the_programs_later_end_wa() {
    // The program's crash or spin comes only after its input ended, that is
    // after the interactor said WA and left.
    judged_to(&[Verdict::WA], "irules-wa-crash", "c11", &then(OK_THEN, CRASH), &["wa"], 1000, 93);
    judged_to(&[Verdict::WA], "irules-wa-spin", "c11", &then(OK_THEN, SPIN), &["wa"], 300, 93);
}

#[test]
fn a_program_that_ended_first_keeps_its_own_verdict() {
    // It crashed, or spun, before the interactor said anything.
    let runs = judge(
        "irules-first-crash",
        "c11",
        &format!("#include <stdlib.h>\nint main(void) {{ {CRASH}; }}\n"),
        &["wa", "ac"],
        1000,
        94,
    );
    assert_eq!(statuses(&runs), [Verdict::RE, Verdict::RE], "{runs:?}");
    let runs = judge("irules-first-spin", "c11", &format!("int main(void) {{ {SPIN}; }}\n"), &["ac"], 300, 94);
    assert_eq!(statuses(&runs), [Verdict::TLE], "{runs:?}");
    // The interactor accepted and left; the program crashed after: its own.
    judged_to(&[Verdict::RE], "irules-ac-crash", "c11", &then(OK_THEN, CRASH), &["ac"], 1000, 94);
}

#[test]
fn an_interactor_that_failed_first_is_je_whatever_the_program_did_after() {
    judged_to(&[Verdict::JE], "irules-fail-crash", "c11", &then(SILENT_THEN, CRASH), &["fail"], 1000, 95);
    let runs = judged_to(&[Verdict::JE], "irules-fail-spin", "c11", &then(SILENT_THEN, SPIN), &["fail"], 300, 95);
    assert!(runs[0].result.stderr.contains("broken on purpose"), "{runs:?}");
}

#[test]
fn a_deadlocked_dialogue_is_idle_a_busy_interactor_is_not() {
    // Both read first: nobody ever speaks. TL 1 s, so a wall limit of 4 s;
    // the idleness rule ends it first (limit "idle", not "wall").
    let runs = judge("irules-deadlock", "c11", ANSWERS_OK, &["ac"], 1000, 96);
    assert_eq!((runs[0].result.status, runs[0].limit), (Verdict::TLE, Some("idle")), "{runs:?}");
    // The interactor works 2.5 s of CPU time before its first word, the
    // program waiting on it past its 2 s limit and the window: AC.
    let runs = judged_to(&[Verdict::AC], "irules-slow", "c11", ANSWERS_OK, &["slow"], 2000, 96);
    assert_eq!(runs[0].limit, None, "{runs:?}");
}

#[test]
fn judge_exec_run_judges_by_the_same_rules() {
    let work = TempDir::new("irules-cli");
    let td = testdata(work.path(), &["wa", "ac"]);
    let src = work.path().join("main.c");
    std::fs::write(&src, then(OK_THEN, CRASH)).unwrap();
    let (code, lines, _) = judge_exec_run(&src, &td, &["--time", "1000", "--checker", "interactive"]);
    // The program crashes once its input ends: after the interactor said WA
    // (WA), or after it accepted (the program's own RE).
    assert_eq!((&lines[0]["status"], &lines[1]["status"]), (&"WA".into(), &"RE".into()), "{lines:?}");
    assert_eq!(code, 1);
}
