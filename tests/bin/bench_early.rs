//! `make bench`, the early verdicts (issue #26; part 7 of BENCHMARKS.md):
//! what they save and what they cost. Each figure is one case judged
//! through `Judge::run_case` (its run and its check, as a worker judges
//! it), wall time:
//!
//! - a program that prints a wrong first line, then computes for 10 s of
//!   CPU time (TL 20 s), next to an A+B's case: target within 1 s of it;
//!   and the same with streaming off (what it cost before);
//! - a sleeper under TL 5 s: target within TL + 0.6 s; and with the
//!   idleness rule off (its wall limit, 16 s);
//! - a correct program's case, both rules on and both off, in interleaved
//!   turns, with a second "off" as the noise floor: target no slower than
//!   twice the floor's distance from 1, or 3 %; for A+B, and for an answer
//!   of 16 MiB (the stream compares every byte once more).
//!
//! And, in this process, each built-in checker's stream alone over the
//! 16 MiB answer against itself, beside its whole comparison of the same:
//! the judge's CPU time a correct output's stream costs.
//!
//! `OJ_BENCH_EARLY_ONLY=1` runs this part alone.

use super::{ms, sample_in_turns, set_mode, APLUSB, SLEEPER, SLOT};
use ojrunner::checker::{Checker, Stream};
use ojrunner::judge::{Case, CaseRun, Compiled, Judge, Slot, Submission};
use ojrunner::language::Languages;
use ojrunner::protocol::{Task, Verdict};
use ojrunner::workspace::Workspace;
use std::fs::File;
use std::io::BufReader;
use std::path::Path;
use std::time::{Duration, Instant};
use testkit::Report;

/// Prints a wrong first line, flushed, then computes for 10 s of its CPU
/// time, then prints the rest of a (still wrong) answer.
const WRONG_THEN_COMPUTE: &str = r#"
#define _POSIX_C_SOURCE 199309L
#include <stdio.h>
#include <time.h>
int main(void) {
    printf("0\n");
    fflush(stdout);
    struct timespec t;
    volatile unsigned long x = 0;
    for (;;) {
        for (int i = 0; i < 10000; i++) x += i;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
        if (t.tv_sec >= 10) break;
    }
    printf("%lu\n", (unsigned long)x & 1);
    return 0;
}
"#;

/// Writes the numbers 0 to n-1, a line each (the big answer's program).
const LINES: &str = r#"
#include <stdio.h>
int main(void) {
    long n;
    if (scanf("%ld", &n) != 1) return 1;
    for (long i = 0; i < n; i++) printf("%ld\n", i);
    return 0;
}
"#;

/// A compiled program and the judge's view of it.
pub(super) struct Program {
    pub(super) src: Workspace,
}

/// `source` in C11 (as the language table compiles it), in `base/name`.
pub(super) fn compile(base: &Path, name: &str, source: &str) -> Result<Program, String> {
    let langs = Languages::builtin();
    let lang = langs.by_name("c11").ok_or("no c11")?;
    let dir = base.join(name);
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    set_mode(&dir, 0o755);
    std::fs::write(dir.join(&lang.source), source).map_err(|e| e.to_string())?;
    let src = Workspace::stage(&dir).map_err(|e| e.to_string())?;
    match Judge::default().compile(lang, &src, &Slot::for_index(SLOT)) {
        Compiled::Ready => Ok(Program { src }),
        other => Err(format!("compiling {name}: {other:?}")),
    }
}

/// One case of `p` judged by `judge` (`data/<case>.in` and `.out`, `tl_ms`
/// of CPU time): its result and how long its judging took.
fn judged(judge: &Judge, p: &Program, data: &Path, case: &str, tl_ms: i64) -> (CaseRun, Duration) {
    let langs = Languages::builtin();
    let lang = langs.by_name("c11").expect("c11");
    let task = Task { task_score: 100, memory_limit: 262144, time_limit: tl_ms, case_count: 1 };
    let sub = Submission { lang, src: &p.src, tasks: std::slice::from_ref(&task), checker: &Checker::Diff };
    let scratch = data.join(format!("scratch-{case}"));
    let _ = std::fs::create_dir_all(&scratch);
    let c = Case { task: 0, case: 0, input: data.join(format!("{case}.in")), answer: data.join(format!("{case}.out")) };
    let t = Instant::now();
    let run = judge.run_case(&sub, &c, &Slot::for_index(SLOT), &scratch);
    (run, t.elapsed())
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

pub fn bench(base: &Path, rep: &mut Report) -> Result<(), String> {
    let base = base.join("early");
    let data = base.join("data");
    std::fs::create_dir_all(&data).map_err(|e| e.to_string())?;
    set_mode(&base, 0o755);
    let ab = compile(&base, "ab", APLUSB)?;
    let wrong = compile(&base, "wrong", WRONG_THEN_COMPUTE)?;
    let sleeper = compile(&base, "sleeper", SLEEPER)?;
    let lines = compile(&base, "lines", LINES)?;
    let n_lines = 2_000_000u64;
    let big: String = (0..n_lines).map(|i| format!("{i}\n")).collect();
    for (name, input, answer) in [("ab", "1 2\n".to_string(), "3\n".to_string()), ("big", format!("{n_lines}\n"), big)]
    {
        std::fs::write(data.join(format!("{name}.in")), input).map_err(|e| e.to_string())?;
        std::fs::write(data.join(format!("{name}.out")), answer).map_err(|e| e.to_string())?;
    }
    let on = Judge::default();
    let off = Judge { stream_verdicts: false, idle_window: Duration::ZERO, ..Judge::default() };
    let expect = |what: &str, run: &CaseRun, status: Verdict, limit: Option<&str>| {
        if run.result.status == status && run.limit == limit {
            Ok(())
        } else {
            Err(format!("{what}: {:?} ({:?}), expected {status:?} ({limit:?})", run.result, run.limit))
        }
    };

    println!();
    println!("early verdicts (issue #26): the judging of one case (its run and check), wall time");
    // Warm: the helper starts at the first run.
    for _ in 0..5 {
        judged(&on, &ab, &data, "ab", 20_000);
    }
    // The median of `n` judgings of `program` with the rules on, each `status`.
    let p50 = |what: &str, program: &Program, n: usize, status: Verdict| -> Result<Duration, String> {
        let mut times = Vec::with_capacity(n);
        for _ in 0..n {
            let (run, t) = judged(&on, program, &data, "ab", 20_000);
            expect(what, &run, status, None)?;
            times.push(t);
        }
        Ok(testkit::stats(times).p50)
    };
    let ab_p50 = p50("A+B", &ab, 21, Verdict::AC)?;
    let wrong_p50 = p50("the wrong first line", &wrong, 5, Verdict::WA)?;
    let (run, wrong_off) = judged(&off, &wrong, &data, "ab", 20_000);
    expect("the wrong first line, streaming off", &run, Verdict::WA, None)?;
    rep.target(
        "wrong first line, then 10 s of work (TL 20 s): WA by A+B + 1 s",
        format!("{:.1} ms (A+B {:.1} ms; streaming off: {:.2} s)", ms(wrong_p50), ms(ab_p50), secs(wrong_off)),
        wrong_p50 <= ab_p50 + Duration::from_secs(1),
    );
    let (run, sleeper_on) = judged(&on, &sleeper, &data, "ab", 5000);
    expect("the sleeper", &run, Verdict::TLE, Some("idle"))?;
    let (run, sleeper_off) = judged(&off, &sleeper, &data, "ab", 5000);
    expect("the sleeper, no idleness rule", &run, Verdict::TLE, Some("wall"))?;
    rep.target(
        "a sleeper under TL 5 s: TLE (idle) by TL + 0.6 s",
        format!("{:.3} s (without the rule: {:.2} s, its wall limit)", secs(sleeper_on), secs(sleeper_off)),
        sleeper_on <= Duration::from_millis(5600),
    );

    // A correct program's price: both rules on, both off, and off again
    // (the noise floor), in interleaved turns.
    let cost = |case: &str, p: &Program, n: usize, turns: usize| -> Result<(f64, f64, Duration), String> {
        let mut wrong = 0;
        let s = {
            let mut with = || wrong += usize::from(judged(&on, p, &data, case, 20_000).0.result.status != Verdict::AC);
            let mut without = || {
                let _ = judged(&off, p, &data, case, 20_000);
            };
            let mut again = || {
                let _ = judged(&off, p, &data, case, 20_000);
            };
            sample_in_turns(turns, &mut [(n, &mut with), (n, &mut without), (n, &mut again)])
        };
        if wrong > 0 {
            return Err(format!("{case}: {wrong} cases not AC with both rules on"));
        }
        let r = |x: Duration| ms(x) / ms(s[1].p50);
        Ok((r(s[0].p50), r(s[2].p50), s[1].p50))
    };
    let answer = data.join("big.out");
    let text = std::fs::read(&answer).map_err(|e| e.to_string())?;
    let open = || File::open(&answer).map(|f| BufReader::with_capacity(64 << 10, f)).map_err(|e| e.to_string());
    println!("  the judge's time to compare a correct 16 MiB output (2 M lines), in this process:");
    for c in [Checker::Diff, Checker::Exact, Checker::Token, Checker::Float { abs: 1e-6, rel: 1e-6 }] {
        let t = Instant::now();
        let mut stream = Stream::of(&c, open()?).ok_or("no stream")?;
        if !text.chunks(64 << 10).all(|chunk| stream.feed(chunk)) {
            return Err(format!("{}: the stream said no to its own answer", c.as_str()));
        }
        let streamed = t.elapsed();
        let t = Instant::now();
        let whole = c.check(open()?, open()?).map_err(|e| e.to_string())?;
        println!(
            "    {:<6} stream {:>6.1} ms, whole comparison {:>6.1} ms{}",
            c.as_str(),
            ms(streamed),
            ms(t.elapsed()),
            if whole { "" } else { " (not AC!)" }
        );
    }
    // Within the noise: no slower than twice the floor's distance from 1
    // (or 3 %, whichever is more); faster is no cost.
    for (what, case, p, n, turns) in
        [("A+B", "ab", &ab, 200, 10), ("answer of 16 MiB (2 M lines)", "big", &lines, 20, 5)]
    {
        let (ratio, floor, base) = cost(case, p, n, turns)?;
        rep.target(
            &format!("a correct {what}: rules on / off, p50"),
            format!("{ratio:.3} (off again: {floor:.3}; off: {:.1} ms)", ms(base)),
            ratio - 1.0 <= (2.0 * (floor - 1.0).abs()).max(0.03),
        );
    }
    Ok(())
}
