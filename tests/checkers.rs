//! Every checker end to end, through `Judge` and through `judge-exec run`:
//! the built-in comparisons (diff, exact, token, float), a special judge
//! compiled from the testdata, and an interactive problem (an interactor and
//! the program connected by two pipes, both sandboxed). Fixtures (checker,
//! interactor and program sources) are in `tests/checkers/`.
//!
//! Run as root (programs run as slot uids 60040–60049 and, for checkers and
//! interactors, their auxiliary uids 61040–61049).

use ojrunner::checker::{BadName, Checker};
use ojrunner::judge::{Case, CaseRun, Compiled, Judge, PrepareError, Slot, Submission};
use ojrunner::language::Languages;
use ojrunner::protocol::{Task, Verdict};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use testkit::{judge_cases, judge_exec_run, repo, staged_source, testdata_dir, TempDir};

fn fixture(name: &str) -> PathBuf {
    repo().join("tests/checkers").join(name)
}

/// A program that copies its input to its output.
const ECHO: &str = "#include <stdio.h>\nint main(void){int c;while((c=getchar())!=EOF)putchar(c);return 0;}\n";

/// A testdata directory (root-only, as claimd makes them) under `work`:
/// cases `00CC.in`/`00CC.out`, and `extra` files copied in under new names.
fn testdata(work: &Path, cases: &[(&str, &str)], extra: &[(&str, PathBuf)]) -> PathBuf {
    let extra: Vec<(&str, Vec<u8>)> = extra.iter().map(|(name, from)| (*name, std::fs::read(from).unwrap())).collect();
    testdata_dir(work, cases, &extra)
}

/// Judges `source` (c11) on every case of `td` with the checker `name` as
/// worker `slot` would: prepare the checker, compile, run each case.
fn judge(work: &Path, source: &str, td: &Path, name: Option<&str>, time: i64, slot: usize) -> Vec<CaseRun> {
    judge_cases(work, "c11", source, td, name, time, slot)
}

fn statuses(runs: &[CaseRun]) -> Vec<Verdict> {
    runs.iter().map(|r| r.result.status).collect()
}

/// A checker's name and its trials: (output, answer, verdict).
type Trials<'a> = (&'a str, &'a [(&'a str, &'a str, Verdict)]);

#[test]
fn builtin_checkers_accept_right_and_reject_wrong_answers() {
    let work = TempDir::new("checkers-builtin");
    let table: &[Trials] = &[
        ("diff", &[("1 2  \n\n", "1 2\n", Verdict::AC), ("1  2\n", "1 2\n", Verdict::WA)]),
        ("exact", &[("1 2\n", "1 2\n", Verdict::AC), ("1 2 \n", "1 2\n", Verdict::WA)]),
        ("token", &[("1\n2   3", "1 2 3\n", Verdict::AC), ("1 2\n", "1 2 3\n", Verdict::WA)]),
        (
            "float",
            &[
                ("3.1415926 YES\n", "3.14159265 YES\n", Verdict::AC),
                ("1000000001000\n", "1e12\n", Verdict::AC),
                ("3.1415\n", "3.14159265\n", Verdict::WA),
                ("3.14159265 NO\n", "3.14159265 YES\n", Verdict::WA),
                ("NaN -Inf\n", "nan -inf\n", Verdict::AC),
                ("inf\n", "1e308\n", Verdict::WA),
            ],
        ),
        ("float:1e-3", &[("3.1415\n", "3.14159265\n", Verdict::AC), ("3.13\n", "3.14159265\n", Verdict::WA)]),
    ];
    for (i, (name, cases)) in table.iter().enumerate() {
        let w = work.path().join(format!("{i}"));
        std::fs::create_dir(&w).unwrap();
        std::fs::set_permissions(&w, std::fs::Permissions::from_mode(0o755)).unwrap();
        let pairs: Vec<(&str, &str)> = cases.iter().map(|(o, a, _)| (*o, *a)).collect();
        let td = testdata(&w, &pairs, &[]);
        let want: Vec<Verdict> = cases.iter().map(|c| c.2).collect();
        assert_eq!(statuses(&judge(&w, ECHO, &td, Some(name), 1000, 40)), want, "checker {name}");
    }
}

#[test]
fn a_placeholder_or_absent_checker_is_diff_and_a_malformed_one_is_an_error() {
    let work = TempDir::new("checkers-names");
    let td = testdata(work.path(), &[("1\n", "1\n")], &[]);
    let (j, slot, cache) = (Judge::default(), Slot::for_index(41), work.path().join("cache"));
    assert!(matches!(j.prepare_checker(None, &td, &cache, &slot), Ok(Checker::Diff)));
    let placeholder = j.prepare_checker(Some("print(\"not implement yet. qaq\")"), &td, &cache, &slot);
    assert!(matches!(placeholder, Ok(Checker::Diff)));
    let e = j.prepare_checker(Some("float:lots"), &td, &cache, &slot).unwrap_err();
    assert!(matches!(e, PrepareError::Name(BadName::Tolerance(_))) && e.to_string().contains("tolerance"), "{e}");
    let e = j.prepare_checker(Some("special"), &td, &cache, &slot).unwrap_err();
    assert!(matches!(e, PrepareError::NoSource { stem: "checker" }), "{e}");
    assert!(e.to_string().contains("checker.cpp or checker.c"), "{e}");
    let e = j.prepare_checker(Some("interactive"), &td, &cache, &slot).unwrap_err();
    assert!(e.to_string().contains("interactor.cpp or interactor.c"), "{e}");
    // Unprepared (the name alone): JE, never a silent diff.
    let langs = Languages::builtin();
    let lang = langs.by_name("c11").unwrap();
    let src = staged_source(work.path(), "main.c", ECHO);
    assert_eq!(j.compile(lang, &src, &slot), Compiled::Ready);
    let scratch = work.path().join("case");
    std::fs::create_dir(&scratch).unwrap();
    let task = Task { task_score: 100, memory_limit: 65536, time_limit: 1000, case_count: 1 };
    let sub = Submission { lang, src: &src, tasks: &[task], checker: &Checker::Unprepared };
    let case = Case { task: 0, case: 0, input: td.join("0000.in"), answer: td.join("0000.out") };
    let r = j.run_case(&sub, &case, &slot, &scratch).result;
    assert_eq!(r.status, Verdict::JE, "{r:?}");
}

#[test]
fn a_special_judge_accepts_any_permutation_where_diff_says_wa() {
    let work = TempDir::new("checkers-special");
    let cases = [("3 1 2\n", "1 2 3\n"), ("1 2 3\n", "1 2 3\n"), ("3 1 1\n", "1 2 3\n"), ("1 2\n", "1 2 3\n")];
    let td = testdata(work.path(), &cases, &[("checker.c", fixture("perm_checker.c"))]);
    assert_eq!(
        statuses(&judge(work.path(), ECHO, &td, Some("diff"), 1000, 42)),
        [Verdict::WA, Verdict::AC, Verdict::WA, Verdict::WA]
    );
    let runs = judge(work.path(), ECHO, &td, Some("special"), 1000, 42);
    assert_eq!(statuses(&runs), [Verdict::AC, Verdict::AC, Verdict::WA, Verdict::WA]);
    // The case still reports the program's own output and exit. (Not its
    // memory > 0: a program this small can read 0, see judging.rs's
    // a_small_program_is_not_charged_for_the_judges_memory.)
    assert_eq!(runs[0].result.stdout, "3 1 2\n");
    assert_eq!(runs[0].result.exit_code, 0);
    // Compiled once: a second preparation finds it in the cache.
    let (j, slot, cache) = (Judge::default(), Slot::for_index(42), work.path().join("cache"));
    let a = j.prepare_checker(Some("special"), &td, &cache, &slot).unwrap();
    let b = j.prepare_checker(Some("special"), &td, &cache, &slot).unwrap();
    assert_eq!(a, b);
    let entries: Vec<_> = std::fs::read_dir(&cache).unwrap().flatten().filter(|e| e.path().is_dir()).collect();
    assert_eq!(entries.len(), 1, "one compiled checker, no build leftovers");
    // No per-case checker directories are left behind.
    let left: Vec<_> = std::fs::read_dir(work.path().join("cases"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| n.to_string_lossy().ends_with(".judge"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn concurrent_preparations_compile_once() {
    let work = TempDir::new("checkers-concurrent");
    let td = testdata(work.path(), &[("1\n", "1\n")], &[("checker.c", fixture("perm_checker.c"))]);
    let cache = work.path().join("cache");
    let got: Vec<Checker> = std::thread::scope(|s| {
        let hs: Vec<_> = [43, 44]
            .map(|i| {
                let (td, cache) = (&td, &cache);
                s.spawn(move || {
                    Judge::default().prepare_checker(Some("special"), td, cache, &Slot::for_index(i)).unwrap()
                })
            })
            .into_iter()
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(got[0], got[1]);
    assert!(matches!(got[0], Checker::Special(_)));
}

#[test]
fn a_broken_checker_is_je_with_its_message_and_a_bad_one_does_not_compile() {
    let work = TempDir::new("checkers-broken");
    let td = testdata(work.path(), &[("1\n", "1\n")], &[("checker.cpp", fixture("broken_checker.cpp"))]);
    let runs = judge(work.path(), ECHO, &td, Some("special"), 1000, 45);
    assert_eq!(runs[0].result.status, Verdict::JE, "{:?}", runs[0]);
    assert!(runs[0].result.stderr.contains("exit 3") && runs[0].result.stderr.contains("broken"), "{:?}", runs[0]);

    let w2 = work.path().join("b");
    std::fs::create_dir(&w2).unwrap();
    std::fs::write(work.path().join("bad.c"), "int main(void) { return syntax error; }\n").unwrap();
    let td = testdata(&w2, &[("1\n", "1\n")], &[("checker.c", work.path().join("bad.c"))]);
    let e =
        Judge::default().prepare_checker(Some("special"), &td, &w2.join("cache"), &Slot::for_index(45)).unwrap_err();
    assert!(matches!(&e, PrepareError::DoesNotCompile { message, .. } if message.contains("error")), "{e}");
    assert!(e.to_string().contains("does not compile"), "{e}");
}

fn guess_problem(work: &Path) -> PathBuf {
    let cases = [("100 37\n", "37\n"), ("1000000 1\n", "1\n"), ("1000000000 999999999\n", "999999999\n")];
    testdata(work, &cases, &[("interactor.c", fixture("guess_interactor.c"))])
}

#[test]
fn an_interactive_problem_judges_by_the_interactor() {
    let work = TempDir::new("checkers-interactive");
    let td = guess_problem(work.path());
    let source = |f: &str| std::fs::read_to_string(fixture(f)).unwrap();
    let ok = judge(work.path(), &source("guess_ok.c"), &td, Some("interactive"), 1000, 46);
    assert_eq!(statuses(&ok), [Verdict::AC; 3], "{ok:?}");
    let wrong = judge(work.path(), &source("guess_wrong.c"), &td, Some("interactive"), 1000, 46);
    assert_eq!(statuses(&wrong), [Verdict::WA, Verdict::AC, Verdict::WA], "{wrong:?}");
    let t = std::time::Instant::now();
    let silent = judge(work.path(), &source("guess_silent.c"), &td, Some("interactive"), 200, 46);
    assert_eq!(statuses(&silent), [Verdict::TLE; 3], "{silent:?}");
    // Both sides wait for the other: the dialogue is idle (0.2 s of wall
    // time, then the 0.5 s window), well before the wall limit (1.6 s).
    assert_eq!(silent[0].limit, Some("idle"));
    assert!(t.elapsed() < std::time::Duration::from_secs(12), "{:?}", t.elapsed());
}

#[test]
fn an_interactive_program_may_open_dev_stdin_and_dev_stdout_by_name() {
    // As on a file-fed case (judging.rs): `/dev/stdin` is the program's
    // end of a pipe the judge made, which the program must be let open.
    let work = TempDir::new("checkers-interactive-devstdin");
    let td = guess_problem(work.path());
    let ok = std::fs::read_to_string(fixture("guess_ok.c")).unwrap().replace(
        "if (scanf(\"%ld\", &n) != 1) return 1;",
        "if (!freopen(\"/dev/stdin\", \"r\", stdin)) { perror(\"/dev/stdin\"); return 2; }\n    \
         if (!freopen(\"/dev/stdout\", \"w\", stdout)) { perror(\"/dev/stdout\"); return 2; }\n    \
         if (scanf(\"%ld\", &n) != 1) return 1;",
    );
    assert!(ok.contains("freopen"), "the fixture changed: {ok}");
    let r = judge(work.path(), &ok, &td, Some("interactive"), 1000, 49);
    assert_eq!(statuses(&r), [Verdict::AC; 3], "{r:?}");
}

#[test]
fn a_broken_interactor_is_je_and_a_crashing_program_is_re() {
    let work = TempDir::new("checkers-interactive-je");
    // The interactor refuses an answer file that disagrees with the input (exit 3).
    let td = testdata(work.path(), &[("100 37\n", "38\n")], &[("interactor.c", fixture("guess_interactor.c"))]);
    let ok = std::fs::read_to_string(fixture("guess_ok.c")).unwrap();
    let r = judge(work.path(), &ok, &td, Some("interactive"), 1000, 47);
    assert_eq!(r[0].result.status, Verdict::JE, "{r:?}");
    assert!(r[0].result.stderr.contains("disagrees"), "{r:?}");
    let w2 = work.path().join("b");
    std::fs::create_dir(&w2).unwrap();
    std::fs::set_permissions(&w2, std::fs::Permissions::from_mode(0o755)).unwrap();
    let td = guess_problem(&w2);
    let crash = "#include <stdio.h>\nint main(void){long n;scanf(\"%ld\",&n);*(volatile int*)0=1;return 0;}\n";
    let r = judge(&w2, crash, &td, Some("interactive"), 1000, 47);
    assert_eq!(r[0].result.status, Verdict::RE, "{r:?}");
}

#[test]
fn the_program_cannot_read_the_answer() {
    let work = TempDir::new("checkers-peek");
    let td = guess_problem(work.path());
    let scratch = work.path().join("cases").join("0000");
    let paths = [
        td.join("0000.out"),
        PathBuf::from(format!("{}.judge/answer", scratch.display())),
        PathBuf::from(format!("{}.judge/input", scratch.display())),
    ];
    let list: Vec<String> = paths.iter().map(|p| format!("{:?}", p.to_string_lossy())).collect();
    let source = std::fs::read_to_string(fixture("guess_peek.c")).unwrap().replace("ANSWER_PATHS", &list.join(", "));
    // Interactive: the interactor is running with the answer next to it.
    let runs = judge(work.path(), &source, &td, Some("interactive"), 1000, 48);
    assert_eq!(runs[0].result.status, Verdict::WA, "{:?}", runs[0]);
    for p in &paths {
        assert!(runs[0].result.stderr.contains(&format!("cannot read {}", p.display())), "{:?}", runs[0]);
    }
    // A special judge: the answer is never where the program runs either.
    let w2 = work.path().join("s");
    std::fs::create_dir(&w2).unwrap();
    std::fs::set_permissions(&w2, std::fs::Permissions::from_mode(0o755)).unwrap();
    let td2 = testdata(&w2, &[("1\n", "42\n")], &[("checker.c", fixture("perm_checker.c"))]);
    let peek = format!(
        "#include <stdio.h>\nint main(void){{long x=0;FILE*f=fopen({:?},\"r\");if(f&&fscanf(f,\"%ld\",&x)==1){{printf(\"%ld\\n\",x);return 0;}}printf(\"0\\n\");return 0;}}\n",
        td2.join("0000.out").to_string_lossy()
    );
    let runs = judge(&w2, &peek, &td2, Some("special"), 1000, 48);
    assert_eq!(runs[0].result.status, Verdict::WA, "{:?}", runs[0]);
}

/// `judge-exec run … --checker NAME`: JSON lines with `status` and `limit`.
fn cli(src: &Path, tests: &Path, checker: &str, time: &str) -> (i32, Vec<serde_json::Value>) {
    let (code, lines, _) = judge_exec_run(src, tests, &["--time", time, "--checker", checker]);
    (code, lines)
}

#[test]
fn judge_exec_run_takes_every_checker() {
    let work = TempDir::new("checkers-cli");
    let echo = work.path().join("echo.c");
    std::fs::write(&echo, ECHO).unwrap();
    let td = testdata(
        work.path(),
        &[("3 1 2\n", "1 2 3\n"), ("2.0000001\n", "2\n")],
        &[("checker.c", fixture("perm_checker.c"))],
    );
    let (code, lines) = cli(&echo, &td, "special", "1000");
    assert_eq!(code, 0, "{lines:?}");
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[0]["status"], "AC");
    assert_eq!(lines[0]["case"], "0000");
    assert!(lines[0].get("limit").is_some(), "{:?}", lines[0]);
    assert_eq!(lines[2]["summary"], true);
    let (code, lines) = cli(&echo, &td, "diff", "1000");
    assert_eq!((code, &lines[0]["status"], &lines[1]["status"]), (1, &"WA".into(), &"WA".into()));
    let (_, lines) = cli(&echo, &td, "float", "1000");
    assert_eq!(lines[1]["status"], "AC");
    let (code, lines) = cli(&echo, &td, "interactive", "1000");
    assert_eq!(code, 1);
    assert_eq!(lines[0]["status"], "JE");
    assert!(lines[0]["stderr"].as_str().unwrap().contains("interactor.c"), "{:?}", lines[0]);

    let w2 = work.path().join("g");
    std::fs::create_dir(&w2).unwrap();
    std::fs::set_permissions(&w2, std::fs::Permissions::from_mode(0o755)).unwrap();
    let td = guess_problem(&w2);
    let (code, lines) = cli(&fixture("guess_ok.c"), &td, "interactive", "1000");
    assert_eq!(code, 0, "{lines:?}");
    let (code, lines) = cli(&fixture("guess_silent.c"), &td, "interactive", "200");
    assert_eq!(code, 1);
    assert_eq!((&lines[0]["status"], &lines[0]["limit"]), (&"TLE".into(), &"idle".into()), "{lines:?}");
}

#[test]
fn judge_exec_run_judges_cases_side_by_side_and_prints_them_in_order() {
    let work = TempDir::new("checkers-side");
    // Each case says when it ran (the host's clock: no time namespace).
    let clock = work.path().join("clock.c");
    std::fs::write(
        &clock,
        "#define _DEFAULT_SOURCE\n#include <stdio.h>\n#include <time.h>\n#include <unistd.h>\n\
         static double now(void){struct timespec t;clock_gettime(CLOCK_REALTIME,&t);return t.tv_sec+t.tv_nsec/1e9;}\n\
         int main(void){double a=now();usleep(200000);printf(\"%.6f %.6f\\n\",a,now());return 0;}\n",
    )
    .unwrap();
    let td = testdata(work.path(), &[("", "x\n"); 8], &[]);
    let (_, lines) = cli(&clock, &td, "diff", "1000");
    assert_eq!(lines.len(), 9, "{lines:?}");
    let names: Vec<&str> = lines[..8].iter().map(|l| l["case"].as_str().unwrap()).collect();
    assert_eq!(names, ["0000", "0001", "0002", "0003", "0004", "0005", "0006", "0007"]);
    let mut spans: Vec<(f64, f64)> = lines[..8]
        .iter()
        .map(|l| {
            let t: Vec<f64> = l["stdout"].as_str().unwrap().split_whitespace().filter_map(|x| x.parse().ok()).collect();
            assert_eq!(t.len(), 2, "{l}");
            (t[0], t[1])
        })
        .collect();
    spans.sort_by(|a, b| a.0.total_cmp(&b.0));
    let overlaps = spans.windows(2).filter(|w| w[1].0 < w[0].1).count();
    if std::thread::available_parallelism().map_or(1, |n| n.get()) > 1 {
        assert!(overlaps > 0, "no two cases ran at once: {spans:?}");
    }
}
