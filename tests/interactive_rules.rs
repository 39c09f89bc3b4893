//! The verdict of an interactive case in each order of events (issue #24),
//! through the real sandbox: the program and the interactor
//! (`tests/interactive_rules/interactor.c`, told how to talk by the case's
//! input) each in its own slot, joined by two pipes, judged by `Judge` and
//! by `judge-exec run`. The rules are `verdict::interactive`'s:
//!
//! - a program that leaves early is its own fault: the interactor, whose
//!   next write would meet a closed pipe, never dies of it (no JE).
//!
//! Run as root (programs run as slot uids 90–99 above the base, the
//! interactors as their auxiliary uids).

use ojrunner::judge::{Case, CaseRun, Compiled, Judge, Slot, Submission};
use ojrunner::language::Languages;
use ojrunner::protocol::{Task, Verdict};
use ojrunner::workspace::Workspace;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use testkit::{repo, source_dir, TempDir};

fn interactor() -> PathBuf {
    repo().join("tests/interactive_rules/interactor.c")
}

/// A testdata directory (root-only, as claimd makes them) under `work`: a
/// case per mode of the interactor, and the interactor.
fn testdata(work: &Path, modes: &[&str]) -> PathBuf {
    let dir = work.join("testdata");
    std::fs::create_dir(&dir).unwrap();
    for (c, mode) in modes.iter().enumerate() {
        std::fs::write(dir.join(format!("00{c:02}.in")), format!("{mode}\n")).unwrap();
        std::fs::write(dir.join(format!("00{c:02}.out")), "ok\n").unwrap();
    }
    std::fs::copy(interactor(), dir.join("interactor.c")).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    dir
}

/// Judges `source` in `lang` against the interactor, a case per mode, as
/// worker `slot` would, with a time limit of `time` ms.
fn judge(tag: &str, lang: &str, source: &str, modes: &[&str], time: i64, slot: usize) -> Vec<CaseRun> {
    let work = TempDir::new(tag);
    let td = testdata(work.path(), modes);
    let j = Judge::default();
    let langs = Languages::builtin();
    let lang = langs.by_name(lang).unwrap();
    let slot = Slot::for_index(slot);
    let checker = j.prepare_checker(Some("interactive"), &td, &work.path().join("cache"), &slot).unwrap();
    let src = source_dir(work.path(), &lang.source, source);
    let src = Workspace::stage(&src).unwrap();
    assert_eq!(j.compile(lang, &src, &slot), Compiled::Ready);
    let task = Task { task_score: 100, memory_limit: 65536, time_limit: time, case_count: modes.len() as i64 };
    (0..modes.len())
        .map(|c| {
            let scratch = work.path().join("cases").join(format!("00{c:02}"));
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

/// Leaves before reading a byte.
const LEAVES: &str = "int main(void) { return 0; }\n";
/// Reads a line, answers "ok", leaves.
const ANSWERS_OK: &str = "#include <stdio.h>\n\
    int main(void) { char b[64]; if (!fgets(b, sizeof b, stdin)) return 1; puts(\"ok\"); return 0; }\n";
#[test]
fn a_program_that_leaves_early_is_wa_never_je() {
    // flood: the interactor's first megabyte meets a pipe nobody will read;
    // late: it reads the program's end, then writes.
    let runs = judge("irules-early", "c11", LEAVES, &["flood", "late"], 1000, 90);
    assert_eq!(statuses(&runs), [Verdict::WA, Verdict::WA], "{runs:?}");
}

#[test]
fn an_interactor_that_says_more_after_a_right_answer_leaves_it_ac() {
    // The program answers and leaves; the interactor's farewell (1 MiB) is
    // never read by anyone.
    let runs = judge("irules-farewell", "c11", ANSWERS_OK, &["farewell", "farewell"], 1000, 91);
    assert_eq!(statuses(&runs), [Verdict::AC; 2], "{runs:?}");
    let python = "input()\nprint('ok')\n";
    let runs = judge("irules-farewell-py", "python3", python, &["farewell", "farewell"], 2000, 92);
    assert_eq!(statuses(&runs), [Verdict::AC; 2], "{runs:?}");
}
