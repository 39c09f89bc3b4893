//! Issue #26, items 1 and 2: verdicts the judge reaches before a program's
//! limits do, with real sandboxes and real programs (through `Judge`, as
//! `tests/judging.rs`). A wrong output is WA as soon as it can no longer
//! match (the built-in checkers' streaming comparison, `checker.rs`); a
//! program whose CPU time stands still past its time limit is TLE
//! (`idle`). And neither ever ends a correct or busy program.
//!
//! Times are bounded only for liveness ("well before its wall limit");
//! the figures are `make bench`'s.

#![deny(clippy::undocumented_unsafe_blocks)]

use ojrunner::checker::Checker;
use ojrunner::judge::{Case, CaseRun, Compiled, Judge, Slot, Submission};
use ojrunner::language::Languages;
use ojrunner::protocol::{Task, Verdict};
use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};
use testkit::{staged_source, TempDir};

/// Judges one case of `source` in `language` (input `input`, answer
/// `answer`, `time_ms` of CPU time) with `checker` as `judge` does, on
/// slot `slot`: the case and how long its run and check took.
fn judge_one(
    judge: &Judge,
    language: &str,
    source: &str,
    checker: &Checker,
    (input, answer): (&str, &str),
    time_ms: i64,
    slot: usize,
) -> (CaseRun, Duration) {
    let langs = Languages::builtin();
    let lang = langs.by_name(language).unwrap_or_else(|| panic!("no language {language}"));
    let work = TempDir::new("early");
    let src = staged_source(work.path(), &lang.source, source);
    let slot = Slot::for_index(slot);
    assert_eq!(judge.compile(lang, &src, &slot), Compiled::Ready);
    let task = Task { task_score: 100, memory_limit: 262144, time_limit: time_ms, case_count: 1 };
    let (i, a) = (work.path().join("0000.in"), work.path().join("0000.out"));
    for (p, text) in [(&i, input), (&a, answer)] {
        std::fs::write(p, text).unwrap();
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let scratch = work.path().join("cases").join("0000");
    std::fs::create_dir_all(&scratch).unwrap();
    let sub = Submission { lang, src: &src, tasks: std::slice::from_ref(&task), checker };
    let start = Instant::now();
    let run = judge.run_case(&sub, &Case { task: 0, case: 0, input: i, answer: a }, &slot, &scratch);
    (run, start.elapsed())
}

fn float() -> Checker {
    Checker::Float { abs: 1e-6, rel: 1e-6 }
}

/// Prints `lines` one at a time, flushed, 50 ms apart, then spins on its
/// CPU clock for `spin` seconds and exits 0.
fn printer(lines: &[&str], spin: f64) -> String {
    format!(
        "import sys, time\nfor l in {lines:?}:\n    sys.stdout.write(l)\n    sys.stdout.flush()\n    time.sleep(0.05)\n\
         t = time.process_time()\nwhile time.process_time() - t < {spin}:\n    pass\n"
    )
}

#[test]
fn a_wrong_first_line_is_wa_at_once_whatever_the_program_does_next() {
    // TL 20 s, 60 s of spinning after the wrong line: without the stream,
    // TLE after 20 s; with it, WA as soon as the line is out.
    for (k, c) in [Checker::Diff, Checker::Exact, Checker::Token, float()].into_iter().enumerate() {
        let source = printer(&["4\n", "more\n"], 60.0);
        let (run, took) = judge_one(&Judge::default(), "python3", &source, &c, ("1 2\n", "3\n"), 20_000, 100 + k);
        let r = &run.result;
        assert_eq!(r.status, Verdict::WA, "{c:?}: {r:?}");
        assert_eq!(run.limit, None, "a stop is no limit: {run:?}");
        assert!(took < Duration::from_secs(15), "{c:?}: not stopped before its time limit: {took:?}");
        assert!(r.exec_time < 15_000, "{c:?}: {r:?}");
        // A number is judged once complete: at its separator.
        let at = if matches!(c, Checker::Float { .. }) { 1 } else { 0 };
        let said = format!("[judge] stopped: the output cannot match the answer at byte {at} (line 1)");
        assert!(r.stderr.contains(&said), "{r:?}");
        assert!(r.stdout.starts_with("4\n"), "what it wrote is kept: {r:?}");
    }
}

#[test]
fn output_that_may_still_match_is_never_stopped() {
    // Each checker's accepted variants, written in flushed pieces (the
    // stream sees them as they come), then half a second of work: AC.
    let cases: [(Checker, &[&str], &str); 6] = [
        (Checker::Diff, &["1 2", "  \t", "\r\n", "3", "\n\n", "  \n"], "1 2\n3\n"),
        (Checker::Diff, &["1 2\r", "\n3\r", "\r\r\n"], "1 2\n3\n"),
        (Checker::Exact, &["1 2\n", "3", "\n"], "1 2\n3\n"),
        (Checker::Token, &["1", "   ", "2\n\n", "3"], "1 2\n3\n"),
        (float(), &["1.0000001", " 2", "e0", "\n3.00", "0000001", "\n"], "1 2\n3\n"),
        (float(), &["nan", " -i", "nf\n"], "NaN -Inf\n"),
    ];
    for (k, (c, pieces, answer)) in cases.into_iter().enumerate() {
        let (run, _) = judge_one(&Judge::default(), "python3", &printer(pieces, 0.5), &c, ("", answer), 5000, 104 + k);
        assert_eq!(run.result.status, Verdict::AC, "{c:?} {pieces:?}: {run:?}");
        assert!(!run.result.stderr.contains("[judge]"), "{run:?}");
    }
}

#[test]
fn output_that_only_grows_blank_is_ole_at_the_limit_not_wa() {
    let judge = Judge { output_limit: 1 << 20, ..Judge::default() };
    let source = "import sys\nsys.stdout.write('3')\nwhile True:\n    sys.stdout.write(' ' * 4096 + '\\n')\n";
    let (run, _) = judge_one(&judge, "python3", source, &Checker::Diff, ("", "3\n"), 5000, 110);
    assert_eq!(run.result.status, Verdict::OLE, "{run:?}");
    assert_eq!(run.limit, Some("output"), "{run:?}");
}

#[test]
fn without_streaming_a_wrong_output_waits_for_the_end() {
    let judge = Judge { stream_verdicts: false, ..Judge::default() };
    let (run, took) =
        judge_one(&judge, "python3", &printer(&["4\n"], 1.5), &Checker::Diff, ("1 2\n", "3\n"), 5000, 111);
    assert_eq!(run.result.status, Verdict::WA, "{run:?}");
    assert!(run.result.exec_time >= 1500 && took >= Duration::from_millis(1500), "it ran to its end: {run:?}");
    assert!(!run.result.stderr.contains("[judge]"), "{run:?}");
}

#[test]
fn a_sleeper_is_tle_idle_soon_after_its_time_limit_not_at_its_wall_limit() {
    // TL 2 s: the wall limit is 7 s.
    let (run, took) = judge_one(
        &Judge::default(),
        "python3",
        "import time\ntime.sleep(60)\n",
        &Checker::Diff,
        ("", "3\n"),
        2000,
        112,
    );
    assert_eq!((run.result.status, run.limit), (Verdict::TLE, Some("idle")), "{run:?}");
    assert!(took < Duration::from_secs(6), "ended well before its wall limit: {took:?}");
    // A program blocked on its own pipe (a deadlock of one): the same.
    let source = "import os\nr, w = os.pipe()\nos.read(r, 1)\n";
    let (run, _) = judge_one(&Judge::default(), "python3", source, &Checker::Diff, ("", "3\n"), 1000, 113);
    assert_eq!((run.result.status, run.limit), (Verdict::TLE, Some("idle")), "{run:?}");
}

#[test]
fn a_window_of_zero_turns_the_idleness_rule_off() {
    let judge = Judge { idle_window: Duration::ZERO, ..Judge::default() };
    let (run, took) = judge_one(&judge, "python3", "import time\ntime.sleep(60)\n", &Checker::Diff, ("", ""), 500, 114);
    assert_eq!((run.result.status, run.limit), (Verdict::TLE, Some("wall")), "{run:?}");
    assert!(took >= Duration::from_millis(2500), "the wall limit (2.5 s) ended it: {took:?}");
}

#[test]
fn busy_programs_and_brief_sleeps_past_the_time_limit_are_never_idle() {
    // Spins past its limit: TLE for its CPU time (or, on a machine so
    // loaded that it gets less than a quarter of its core, its wall
    // limit), never idle.
    let spin = "while True:\n    pass\n";
    let (run, _) = judge_one(&Judge::default(), "python3", spin, &Checker::Diff, ("", ""), 1000, 115);
    assert_eq!(run.result.status, Verdict::TLE, "{run:?}");
    assert_ne!(run.limit, Some("idle"), "{run:?}");
    // Works and sleeps by turns (0.2 s each, under the 0.5 s window) for
    // about twice its limit of wall time, within its limit of CPU time: AC.
    let turns = "import time\nfor _ in range(8):\n    t = time.process_time()\n    \
        while time.process_time() - t < 0.05:\n        pass\n    time.sleep(0.2)\nprint(3)\n";
    let (run, took) = judge_one(&Judge::default(), "python3", turns, &Checker::Diff, ("", "3\n"), 1000, 116);
    assert_eq!(run.result.status, Verdict::AC, "{run:?}");
    assert!(took > Duration::from_secs(1), "it waited past its limit of wall time: {took:?}");
    // Reads its input slowly, a line at a time: I/O is work.
    let input: String = (0..200_000).map(|i| format!("{i}\n")).collect();
    let reader = "import sys\ns = 0\nfor l in sys.stdin:\n    s += int(l)\nprint(s)\n";
    let sum = (0..200_000u64).sum::<u64>().to_string() + "\n";
    let (run, _) = judge_one(&Judge::default(), "python3", reader, &Checker::Diff, (&input, &sum), 5000, 117);
    assert_eq!(run.result.status, Verdict::AC, "{run:?}");
}
