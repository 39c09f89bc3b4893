//! The judging core end to end: real compilers, real processes, the example
//! problems and submissions of `examples/`, through `Judge` (no daemons).
//!
//! Run as root, programs run as slot uids; each test uses its own slots
//! (a slot serves one run at a time: after each run every process of its uid
//! is killed). As another user they run as that user, and the checks that
//! need a slot are skipped.

#![deny(clippy::undocumented_unsafe_blocks)]

use ojrunner::checker::Checker;
use ojrunner::judge::{Case, Compiled, Judge, Slot, Slots, Submission};
use ojrunner::language::Languages;
use ojrunner::protocol::{CaseResult, Task, Verdict};
use ojrunner::workspace::Workspace;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use testkit::{examples, is_root, processes_of, skip, slot_spec, staged_source, TempDir};

/// A judged submission: every case's result, the verdict and the score.
struct Judged {
    cases: Vec<Vec<CaseResult>>,
    status: Verdict,
    score: i64,
}

impl Judged {
    fn first(&self) -> &CaseResult {
        &self.cases[0][0]
    }
}

/// Judges `source` (the file's text) in `language` against the problem in
/// `problem` (meta.json + TTCC.in/out), as worker `slot` would.
fn judge(language: &str, source: &str, problem: &Path, slot: usize) -> Judged {
    judge_with(&Judge::default(), language, source, problem, slot)
}

fn judge_with(j: &Judge, language: &str, source: &str, problem: &Path, slot: usize) -> Judged {
    let tasks = read_meta(problem);
    let langs = Languages::builtin();
    let lang = langs.by_name(language).unwrap_or_else(|| panic!("no language {language}"));
    let work = TempDir::new("judging");
    let src = staged_source(work.path(), &lang.source, source);
    let slot = Slot::for_index(slot);
    let compiled = j.compile(lang, &src, &slot);
    let mut cases = Vec::new();
    for (t, task) in tasks.iter().enumerate() {
        let mut results = Vec::new();
        for c in 0..task.case_count as usize {
            let name = format!("{t:02}{c:02}");
            results.push(match &compiled {
                Compiled::Ready => {
                    let scratch = work.path().join("cases").join(&name);
                    std::fs::create_dir_all(&scratch).unwrap();
                    let (input, answer) = (problem.join(format!("{name}.in")), problem.join(format!("{name}.out")));
                    let sub = Submission { lang, src: &src, tasks: &tasks, checker: &Checker::Diff };
                    j.run_case(&sub, &Case { task: t, case: c, input, answer }, &slot, &scratch).result
                }
                Compiled::Failed { message } => CaseResult {
                    status: Verdict::CE,
                    exec_time: -1,
                    memory_usage: -1,
                    exit_code: -1,
                    stdout: String::new(),
                    stderr: message.clone(),
                },
                Compiled::JudgeError(why) => CaseResult::judge_error(why),
            });
        }
        cases.push(results);
    }
    let status = cases.iter().flatten().fold(Verdict::AC, |s, r| s.worst(r.status));
    let score = tasks
        .iter()
        .zip(&cases)
        .filter(|(_, rs)| rs.iter().all(|r| r.status == Verdict::AC))
        .map(|(t, _)| t.task_score)
        .sum();
    Judged { cases, status, score }
}

fn read_meta(problem: &Path) -> Vec<Task> {
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(problem.join("meta.json")).unwrap()).unwrap();
    serde_json::from_value(meta["tasks"].clone()).unwrap()
}

/// A one-task, one-case problem written on the fly. Its files are readable by
/// root only: the judged program gets its input as an open stdin.
fn problem(dir: &TempDir, time_ms: i64, memory_kib: i64, input: &str, answer: &str) -> PathBuf {
    let p = dir.path().join("problem");
    std::fs::create_dir_all(&p).unwrap();
    let meta = serde_json::json!({"tasks": [{"taskScore": 100, "memoryLimit": memory_kib, "timeLimit": time_ms, "caseCount": 1}]});
    std::fs::write(p.join("meta.json"), meta.to_string()).unwrap();
    for (name, text) in [("0000.in", input), ("0000.out", answer)] {
        std::fs::write(p.join(name), text).unwrap();
        std::fs::set_permissions(p.join(name), std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    p
}

#[test]
fn every_example_gets_its_expected_verdict_and_score() {
    let list: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(examples().join("submissions.json")).unwrap()).unwrap();
    assert!(list.len() >= 10, "examples/submissions.json lists {} submissions", list.len());
    // Two workers, as a runner on this 2-core box would have; slots 40 and 41.
    let list = std::sync::Mutex::new(list.into_iter().collect::<std::collections::VecDeque<_>>());
    let failures = std::sync::Mutex::new(Vec::<String>::new());
    let start = Instant::now();
    std::thread::scope(|s| {
        for worker in 0..2 {
            let (list, failures) = (&list, &failures);
            s.spawn(move || loop {
                let Some(ex) = list.lock().unwrap().pop_front() else { return };
                let file = ex["file"].as_str().unwrap();
                let source = std::fs::read_to_string(examples().join("submissions").join(file)).unwrap();
                let problem = examples().join("problems").join(ex["problem"].to_string());
                let t = Instant::now();
                let got = judge(ex["language"].as_str().unwrap(), &source, &problem, 40 + worker);
                let expect: Verdict = ex["expect"].as_str().unwrap().parse().unwrap();
                let score = ex["score"].as_i64().unwrap();
                let summary: Vec<String> = got
                    .cases
                    .iter()
                    .flatten()
                    .map(|r| format!("{}({}ms,{}KiB,exit {})", r.status, r.exec_time, r.memory_usage, r.exit_code))
                    .collect();
                eprintln!("{file}: {} score {} in {:?}: {}", got.status, got.score, t.elapsed(), summary.join(" "));
                let mut wrong = Vec::new();
                if got.status != expect || got.score != score {
                    wrong.push(format!("got {} score {}, expected {expect} score {score}", got.status, got.score));
                }
                if let Some(needle) = ex["stderr_contains"].as_str() {
                    if !got.cases.iter().flatten().all(|r| r.stderr.contains(needle)) {
                        wrong.push(format!("stderr lacks {needle:?}: {:?}", got.first().stderr));
                    }
                }
                if !wrong.is_empty() {
                    failures.lock().unwrap().push(format!("{file}: {} ({})", wrong.join("; "), summary.join(" ")));
                }
            });
        }
    });
    eprintln!("all examples judged in {:?}", start.elapsed());
    let failures = failures.into_inner().unwrap();
    assert!(failures.is_empty(), "examples judged wrong:\n{}", failures.join("\n"));
}

#[test]
fn a_busy_loop_is_killed_at_the_time_limit_not_the_rlimit() {
    let dir = TempDir::new("busy");
    let p = problem(&dir, 1000, 65536, "1 2\n", "3\n");
    let source = std::fs::read_to_string(examples().join("submissions/ab_tle.c")).unwrap();
    let t = Instant::now();
    let got = judge("c11", &source, &p, 50);
    assert_eq!(got.status, Verdict::TLE);
    let r = got.first();
    assert!((1000..1500).contains(&r.exec_time), "killed at {} ms of CPU", r.exec_time);
    assert!(t.elapsed() < Duration::from_secs(10), "took {:?}", t.elapsed());
}

#[test]
fn a_sleeper_is_tle_within_a_bounded_wall_time() {
    let dir = TempDir::new("sleeper");
    let p = problem(&dir, 500, 65536, "", "done\n");
    let t = Instant::now();
    // The wall limit's test: the idleness rule, which would end it sooner, is early_verdicts.rs's.
    let judge = Judge { idle_window: Duration::ZERO, ..Judge::default() };
    let got = judge_with(&judge, "python3", "import time\ntime.sleep(100)\nprint('done')\n", &p, 51);
    let took = t.elapsed();
    assert_eq!(got.status, Verdict::TLE, "{:?}", got.first());
    // The wall limit is 3 × 500 ms + 1 s.
    assert!(took >= Duration::from_millis(2500) && took < Duration::from_secs(6), "took {took:?}");
    assert!(got.first().exec_time < 500, "a sleeper uses little CPU: {:?}", got.first());
}

#[test]
fn background_children_do_not_outlive_the_run() {
    // Three children that outlive their parent: one in its process group, one
    // that left it with setsid, one double-forked daemon.
    let source = r#"
import os, time
r, w = os.pipe()
for how in ("group", "setsid", "daemon"):
    pid = os.fork()
    if pid == 0:
        if how != "group":
            os.setsid()
        if how == "daemon":
            if os.fork() != 0:
                os._exit(0)
            os.write(w, b"%d\n" % os.getpid())
        else:
            os.write(w, b"%d\n" % os.getpid())
        time.sleep(100)
        os._exit(0)
    if how == "daemon":
        os.waitpid(pid, 0)
    print(int(os.read(r, 64)), flush=True)
"#;
    let dir = TempDir::new("background");
    let p = problem(&dir, 1000, 262144, "", "");
    let t = Instant::now();
    // To its end: a stream would stop it at its first line, which the answer lacks.
    let got = judge_with(&Judge { stream_verdicts: false, ..Judge::default() }, "python3", source, &p, 52);
    assert!(t.elapsed() < Duration::from_secs(3), "the run waited for its children: {:?}", t.elapsed());
    let r = got.first();
    assert_eq!(r.exit_code, 0, "{r:?}");
    let pids: Vec<i32> = r.stdout.lines().map(|l| l.trim().parse().unwrap()).collect();
    assert_eq!(pids.len(), 3, "{r:?}");
    // As root the run has its own PID namespace (the pids printed are its
    // own) and runs as a slot uid: no process of that uid may be left.
    // Otherwise only the child in the process group can be found and killed.
    if !is_root() {
        assert!(!Path::new(&format!("/proc/{}", pids[0])).exists(), "child {} outlived the run", pids[0]);
    }
    if is_root() {
        assert_eq!(processes_of(Slot::for_index(52).uid), Vec::<i32>::new());
    }
}

/// What `f` returned, and how long it took (for bounds on liveness only).
fn timed<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let t = Instant::now();
    let r = f();
    (r, t.elapsed())
}

#[test]
fn a_fork_bomb_is_contained() {
    let source = "#include <unistd.h>\nint main(void) { for (;;) fork(); }\n";
    let dir = TempDir::new("forkbomb");
    let p = problem(&dir, 1000, 65536, "", "");
    let (got, took) = timed(|| judge("c11", source, &p, 53));
    assert!(matches!(got.status, Verdict::TLE | Verdict::MLE), "{:?}", got.first());
    assert!(took < Duration::from_secs(8), "took {took:?}");
    if is_root() {
        assert_eq!(processes_of(Slot::for_index(53).uid), Vec::<i32>::new(), "the bomb's processes survived");
    }
}

#[test]
fn a_run_after_a_fork_bomb_is_not_charged_for_the_bombs_kernel_memory() {
    // The bomb's failed forks leave tens of MiB of thread stacks the kernel
    // frees only after an RCU grace period: the next run in the same helper
    // (cases of one slot run one after another) must not be charged for them.
    let source = "#include <stdio.h>\n#include <unistd.h>\nint main(void) {\n  int c = getchar();\n  \
                  if (c == 'b') for (;;) fork();\n  puts(\"ok\");\n  return 0;\n}\n";
    let dir = TempDir::new("afterbomb");
    let p = problem(&dir, 500, 32768, "", "");
    let pairs = 8;
    let meta = serde_json::json!({"tasks": [{"taskScore": 100, "memoryLimit": 32768, "timeLimit": 500, "caseCount": 2 * pairs}]});
    std::fs::write(p.join("meta.json"), meta.to_string()).unwrap();
    for c in 0..2 * pairs {
        let input = if c % 2 == 0 { "b\n" } else { "o\n" };
        std::fs::write(p.join(format!("00{c:02}.in")), input).unwrap();
        std::fs::write(p.join(format!("00{c:02}.out")), "ok\n").unwrap();
    }
    let got = judge("c11", source, &p, 74);
    for (c, r) in got.cases[0].iter().enumerate() {
        if c % 2 == 0 {
            assert!(matches!(r.status, Verdict::TLE | Verdict::MLE), "bomb {c}: {r:?}");
        } else {
            assert_eq!(r.status, Verdict::AC, "case {c}: {r:?}");
            // What may be left of the bomb unwaited for is within
            // `cgroup::UNSETTLED` (4 MiB); the program's own, under 1 MiB.
            let bound = (ojrunner::sandbox::cgroup::UNSETTLED >> 10) as i64 + 1024;
            assert!(r.memory_usage < bound, "case {c}, after a bomb, read {} KiB", r.memory_usage);
        }
    }
}

#[test]
fn a_compile_error_carries_the_compilers_message() {
    let langs = Languages::builtin();
    let work = TempDir::new("ce");
    let src = staged_source(work.path(), "main.cpp", "int main() { return undefined_name; }\n");
    let judge = Judge { output_cap: 200, ..Judge::default() };
    match judge.compile(langs.by_name("cpp17").unwrap(), &src, &Slot::for_index(54)) {
        Compiled::Failed { message } => {
            assert!(message.contains("undefined_name") && message.contains("error"), "{message}");
            assert!(message.len() <= 200, "the message is capped: {} bytes", message.len());
        }
        other => panic!("expected a compile error, got {other:?}"),
    }
    // The compiler's leftovers are the judge's again.
    let meta = std::fs::metadata(src.path()).unwrap();
    use std::os::unix::fs::MetadataExt;
    assert_eq!(meta.uid(), 0, "src dir not taken back");
}

/// Compiles `source` as c11 with a 64 KiB compile output limit; the CE
/// message must name the limit that stopped it (`words`) and fit the cap.
fn compile_stopped_by(name: &str, source: &str, words: &str) {
    let work = TempDir::new(name);
    let src = staged_source(work.path(), "main.c", source);
    let judge = Judge { compile_output: 64 << 10, ..Judge::default() };
    match judge.compile(Languages::builtin().by_name("c11").unwrap(), &src, &Slot::for_index(54)) {
        Compiled::Failed { message } => {
            assert!(message.contains(words), "the limit is not named: {message}");
            assert!(message.len() <= judge.output_cap, "the message is capped: {} bytes", message.len());
        }
        other => panic!("expected a compile error, got {other:?}"),
    }
}

#[test]
fn a_compile_stopped_by_the_file_size_limit_says_so() {
    // 1 MiB of initialized data: the assembler's object passes the limit.
    let big = "char big[1 << 20] = {1};\nint main(void) { return big[0]; }\n";
    compile_stopped_by("cefsize", big, "file size limit (64 KiB)");
}

#[test]
fn a_compile_whose_messages_reach_the_output_limit_says_so() {
    // One error whose text (and the line gcc quotes) is 200 KiB long.
    let flood = format!("#error {}\nint main(void) {{ return 0; }}\n", "A".repeat(200 << 10));
    compile_stopped_by("ceflood", &flood, "messages reached the output limit (64 KiB)");
}

#[test]
fn a_language_whose_toolchain_is_missing_is_named_with_the_program() {
    let langs = Languages::parse(
        r#"{"languages": [{"id": 9, "name": "ghost", "source": "main.c",
            "compile": ["/nonexistent/ghostc", "main.c"], "run": ["./main"]}]}"#,
    )
    .unwrap();
    let work = TempDir::new("ghost");
    std::fs::write(work.path().join("main.c"), "int main(void) { return 0; }\n").unwrap();
    match Judge::default().compile(
        langs.by_name("ghost").unwrap(),
        &Workspace::stage(work.path()).unwrap(),
        &Slot::for_index(54),
    ) {
        Compiled::JudgeError(why) => {
            assert!(why.contains("language ghost") && why.contains("/nonexistent/ghostc"), "{why}")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_missing_source_is_the_judges_error() {
    let langs = Languages::builtin();
    let work = TempDir::new("nosrc");
    match Judge::default().compile(
        langs.by_name("c11").unwrap(),
        &Workspace::stage(work.path()).unwrap(),
        &Slot::for_index(54),
    ) {
        Compiled::JudgeError(why) => assert!(why.contains("main.c"), "{why}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_resumed_claim_compiles_again_in_the_same_dir() {
    let langs = Languages::builtin();
    let lang = langs.by_name("c11").unwrap();
    let work = TempDir::new("recompile");
    let ab_ok = std::fs::read_to_string(examples().join("submissions/ab_ok.c")).unwrap();
    let src = staged_source(work.path(), "main.c", &ab_ok);
    let judge = Judge::default();
    assert_eq!(judge.compile(lang, &src, &Slot::for_index(55)), Compiled::Ready);
    assert_eq!(judge.compile(lang, &src, &Slot::for_index(56)), Compiled::Ready, "with a root-owned ./main present");
}

#[test]
fn output_is_capped_for_the_hub() {
    let dir = TempDir::new("cap");
    let p = problem(&dir, 2000, 262144, "", "short\n");
    // Run to its end (no stream, which would stop it at its first byte).
    let judge = Judge { stream_verdicts: false, ..Judge::default() };
    let source = "import sys\nsys.stdout.write('x' * (10 << 20))\nsys.stderr.write('y' * (1 << 20))\n";
    let got = judge_with(&judge, "python3", source, &p, 57);
    let r = got.first();
    assert_eq!(r.status, Verdict::WA, "{} {} {}", r.status, r.exit_code, &r.stderr[..r.stderr.len().min(300)]);
    assert_eq!(r.stdout.len(), 64 * 1024);
    assert_eq!(r.stderr.len(), 64 * 1024);
    assert!(r.stdout.bytes().all(|b| b == b'x'));
}

#[test]
fn output_past_the_limit_is_ole_even_when_sigxfsz_is_ignored() {
    // Python ignores SIGXFSZ: the write fails with EFBIG and it exits 1.
    let dir = TempDir::new("ole");
    let p = problem(&dir, 2000, 262144, "", "");
    // No stream, which would stop it at its first byte (WA).
    let judge = Judge { output_limit: 1 << 20, stream_verdicts: false, ..Judge::default() };
    let got = judge_with(&judge, "python3", "while True:\n    print('spam' * 100)\n", &p, 58);
    assert_eq!(got.status, Verdict::OLE, "{:?}", got.first().exit_code);
}

#[test]
fn memory_is_measured_roughly_right() {
    let source = r#"
#include <stdio.h>
#include <stdlib.h>
int main(void) {
    size_t n = 64u << 20;
    volatile char *p = malloc(n);   /* volatile: the compiler must really write */
    for (size_t i = 0; i < n; i += 4096) p[i] = 1;
    printf("%d\n", p[n - 4096]);
    return 0;
}
"#;
    let dir = TempDir::new("memory");
    let p = problem(&dir, 2000, 262144, "", "1\n");
    let got = judge("c11", source, &p, 59);
    let r = got.first();
    assert_eq!(r.status, Verdict::AC, "{r:?}");
    assert!((60 * 1024..=80 * 1024).contains(&r.memory_usage), "64 MiB touched, {} KiB reported", r.memory_usage);
}

#[test]
fn a_program_past_its_memory_limit_is_mle_while_its_own_file_cache_thrashes() {
    use ojrunner::sandbox::{self, Fired};
    if !is_root() {
        return skip("the run's file cache is charged to its group only under the sandbox's cgroup");
    }
    // A file the run reads first (dropped from the host's cache), so its
    // pages are charged to the run's group: at the group's hard limit the
    // kernel evicts them rather than end the program, which reads them back
    // in, again and again (an interpreter on a cold host does the same with
    // its own files), until its CPU limit: TLE. Its own memory passed the
    // limit first: MLE, as soon as the watchdog sees it.
    let dir = TempDir::new("thrash");
    testkit::built_hostile("cache_thrash.c", dir.path());
    let cache = dir.path().join("cache");
    std::fs::write(&cache, vec![7u8; 32 << 20]).unwrap();
    testkit::uncache(&cache);
    let mut spec = slot_spec(&["./prog"], dir.path(), 69, 64, 16);
    spec.limits.cpu = Duration::from_secs(3);
    let limits = spec.limits.clone();
    let t = Instant::now();
    let run = sandbox::run(spec).unwrap();
    let verdict = ojrunner::verdict::decide(&run, &limits, 0);
    assert_eq!((verdict, run.fired), (Some(Verdict::MLE), Some(Fired::Memory)), "{run:?} in {:?}", t.elapsed());
}

#[test]
fn a_small_program_is_not_charged_for_the_judges_memory() {
    // The judge (this test binary) is larger than the limit's slack would
    // allow if the inherited high-water mark were believed.
    let dir = TempDir::new("small");
    let p = problem(&dir, 1000, 65536, "1 2\n", "3\n");
    let source = std::fs::read_to_string(examples().join("submissions/ab_ok.c")).unwrap();
    let got = judge("c11", &source, &p, 60);
    let r = got.first();
    assert_eq!(r.status, Verdict::AC, "{r:?}");
    // Not "> 0": a program this small can live on the pages the kernel
    // charged the group ahead (a batch of 64 a CPU, `cgroup.rs`) and be gone
    // before the watchdog's first look; it then reads 0 (seen 1 run in 4 on
    // a loaded machine, before and after issue 12).
    assert!(r.memory_usage < 16 * 1024, "{} KiB for A+B", r.memory_usage);
}

#[test]
fn runs_cannot_write_to_the_source_dir_but_can_use_tmpdir() {
    if !is_root() {
        return skip("the jailed level needs root");
    }
    let source = r##"
import os, tempfile
try:
    open("main.py", "a").write("# tampered\n")
    print("wrote main.py")
except PermissionError:
    print("main.py is read-only")
with tempfile.TemporaryFile() as f:
    f.write(b"scratch")
print("tmp ok")
"##;
    let dir = TempDir::new("readonly");
    let p = problem(&dir, 1000, 65536, "", "main.py is read-only\ntmp ok\n");
    let got = judge("python3", source, &p, 61);
    assert_eq!(got.status, Verdict::AC, "{:?}", got.first());
}

#[test]
fn a_program_may_open_dev_stdout_and_dev_stderr_by_name() {
    // `/dev/stdout` is a link to `/proc/self/fd/1`, which opens the file
    // anew and checks its own permissions: the judge's file, not the slot's.
    let source = "#include <stdio.h>\nint main(void) {\n  \
                  if (!freopen(\"/dev/stdout\", \"w\", stdout)) { perror(\"stdout\"); return 1; }\n  \
                  FILE *e = fopen(\"/dev/stderr\", \"w\");\n  if (!e) { perror(\"stderr\"); return 2; }\n  \
                  puts(\"42\");\n  fputs(\"by name\\n\", e);\n  return 0;\n}\n";
    let dir = TempDir::new("devstdout");
    let p = problem(&dir, 1000, 65536, "", "42\n");
    let got = judge("c11", source, &p, 75);
    let r = got.first();
    assert_eq!(r.status, Verdict::AC, "{r:?}");
    assert_eq!(r.stderr, "by name\n", "{r:?}");
}

#[test]
fn a_program_may_open_dev_stdin_by_name_but_not_the_answer_by_path() {
    // As the runner keeps testdata (`testdata.rs`, `archive.rs`): files
    // 0644 in a directory only root may enter. `/dev/stdin` opens the input
    // through the program's own descriptor, past the directory (0600 gave
    // RE, "Permission denied"); the answer beside it stays out of reach by
    // path (the jail does not show the testdata; without a jail, the
    // directory is root's alone).
    let dir = TempDir::new("devstdin");
    let p = problem(&dir, 1000, 65536, "40 2\n", "42\n");
    for f in ["0000.in", "0000.out"] {
        std::fs::set_permissions(p.join(f), std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o700)).unwrap();
    let answer = p.join("0000.out");
    let source = format!(
        "#include <stdio.h>\nint main(void) {{\n  \
         FILE *in = fopen(\"/dev/stdin\", \"r\");\n  if (!in) {{ perror(\"/dev/stdin\"); return 1; }}\n  \
         int a, b;\n  if (fscanf(in, \"%d %d\", &a, &b) != 2) return 2;\n  \
         if (fopen(\"{}\", \"r\")) {{ fputs(\"read the answer\\n\", stderr); return 3; }}\n  \
         printf(\"%d\\n\", a + b);\n  return 0;\n}}\n",
        answer.display()
    );
    let got = judge("c11", &source, &p, 76);
    let r = got.first();
    assert_eq!(r.status, Verdict::AC, "{r:?}");
}

#[test]
fn a_program_cannot_swap_its_output_for_a_link_to_the_answer() {
    // The scratch dir is the slot's, so a program can replace the file its
    // stdout goes to; the judge must check what was written, not the path.
    let source = r#"
import os
answer = input().strip()
out = os.path.join(os.environ["TMPDIR"], "stdout")
os.remove(out)
os.symlink(answer, out)
"#;
    let dir = TempDir::new("swap");
    let answer = dir.path().join("problem/0000.out");
    let p = problem(&dir, 1000, 65536, &format!("{}\n", answer.display()), "the secret answer\n");
    let got = judge("python3", source, &p, 62);
    // Jailed (as root), TMPDIR is a private /tmp with no stdout in it: RE.
    let expect = if is_root() { Verdict::RE } else { Verdict::WA };
    assert_eq!(got.status, expect, "{:?}", got.first());
}

#[test]
fn two_runs_on_one_slot_take_turns() {
    // Without the slot's lock, the sweep after one run would kill the other.
    let source = "import time\nt = time.time()\nwhile time.time() - t < 0.4:\n    pass\nprint('ok')\n";
    let dir = TempDir::new("turns");
    let p = problem(&dir, 2000, 65536, "", "ok\n");
    let t = Instant::now();
    let results: Vec<Verdict> = std::thread::scope(|s| {
        let runs: Vec<_> = (0..2).map(|_| s.spawn(|| judge("python3", source, &p, 63).status)).collect();
        runs.into_iter().map(|r| r.join().unwrap()).collect()
    });
    assert_eq!(results, vec![Verdict::AC, Verdict::AC]);
    if is_root() {
        assert!(t.elapsed() >= Duration::from_millis(800), "the runs overlapped: {:?}", t.elapsed());
    }
}

#[test]
fn a_run_whose_helper_dies_is_judged_again_and_leaves_nothing_behind() {
    if !is_root() {
        return skip("the jailed level needs root; the basic level is covered in sandbox.rs");
    }
    // It sleeps past its wall limit (TLE), so a first run left alive by its
    // dead helper would still be there when the second one is over.
    let source = "import time\nprint(int(input()) * 2, flush=True)\ntime.sleep(60)\n";
    let dir = TempDir::new("helperdeath");
    let p = problem(&dir, 300, 262144, "21\n", "42\n");
    let uid = Slot::for_index(64).uid;
    // Kill the helper once, while the program (as the slot uid) sleeps: the
    // program's parent (the kept jail's), or its parent's (a fresh jail's
    // init's).
    let killer = std::thread::spawn(move || {
        let parent = |pid: i32| -> Option<i32> {
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
            status.lines().find_map(|l| l.strip_prefix("PPid:"))?.trim().parse().ok()
        };
        let is_helper = |pid: &i32| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c.starts_with(b"ojrunner-sandbox-helper\0"))
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            for pid in processes_of(uid) {
                let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                if String::from_utf8_lossy(&cmdline).contains("main.py\0") {
                    let up = parent(pid);
                    if let Some(helper) = up.filter(is_helper).or_else(|| up.and_then(parent).filter(is_helper)) {
                        // SAFETY: kill takes no pointer.
                        unsafe { libc::kill(helper, libc::SIGKILL) };
                        return helper;
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        panic!("the program never ran");
    });
    let t = Instant::now();
    let got = judge("python3", source, &p, 64);
    let helper = killer.join().unwrap();
    // The first run, left alive, would hold the slot for its whole minute.
    assert!(t.elapsed() < Duration::from_secs(30), "the second run waited for the first: {:?}", t.elapsed());
    assert!(!Path::new(&format!("/proc/{helper}")).exists(), "helper {helper} not reaped");
    let r = got.first();
    assert_eq!((r.status, r.stdout.as_str()), (Verdict::TLE, "42\n"), "{r:?}");
    assert_eq!(processes_of(uid), Vec::<i32>::new(), "the first run's processes outlived their helper");
}

#[test]
fn each_run_sees_its_own_binds_and_slot_in_the_shared_template_root() {
    if !is_root() {
        return skip("no jail without root");
    }
    use ojrunner::sandbox::{self, Spec};
    use std::io::{Read, Seek};
    // Work dirs outside /tmp: their mount points are made in the helper's
    // template (not in a run's own /tmp) and must not outlive their run.
    let base = PathBuf::from(format!("/srv/ojt-template-{}", std::process::id()));
    let dirs = [base.join("first"), base.join("second")];
    for d in &dirs {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o755)).unwrap();
    let run = |dir: &Path, slot: usize| -> String {
        let out = tempfile_in_tmp();
        let argv = ["/bin/sh", "-c", &format!("ls {}; grep judge /etc/passwd", base.display())];
        let spec = Spec { stdout: out.try_clone().unwrap(), ..slot_spec(&argv, dir, slot, 64, 16) };
        let u = sandbox::run(spec).unwrap();
        assert_eq!(u.exit, sandbox::Exit::Code(0), "{u:?}");
        let mut s = String::new();
        let mut out = out;
        out.rewind().unwrap();
        out.read_to_string(&mut s).unwrap();
        s
    };
    let (a, b) = (Slot::for_index(65).uid, Slot::for_index(66).uid);
    let first = run(&dirs[0], 65);
    let second = run(&dirs[1], 66);
    std::fs::remove_dir_all(&base).unwrap();
    assert!(first.starts_with("first\n") && first.contains(&format!("judge:x:{a}:")), "{first}");
    assert!(second.starts_with("second\n") && second.contains(&format!("judge:x:{b}:")), "{second}");
}

/// An unnamed scratch file.
fn tempfile_in_tmp() -> std::fs::File {
    tempfile_in(&std::env::temp_dir())
}

#[test]
fn a_lone_jobs_cases_run_on_idle_slots_too_which_go_back_to_a_claim_that_waits() {
    use ojrunner::sandbox::slot::SlotPool;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let langs = Languages::builtin();
    let lang = langs.by_name("python3").unwrap();
    let work = TempDir::new("sidebyside");
    let src = staged_source(work.path(), &lang.source, "import os, time\nprint(os.getuid())\ntime.sleep(0.2)\n");
    let (own, lent) = (Slot::for_index(67), 68);
    let judge = Judge::default();
    assert!(matches!(judge.compile(lang, &src, &own), Compiled::Ready));
    let p = problem(&work, 1000, 262144, "", "");
    let task = Task { task_score: 100, memory_limit: 262144, time_limit: 1000, case_count: 12 };
    let cases: Vec<Case> =
        (0..12).map(|c| Case { task: 0, case: c, input: p.join("0000.in"), answer: p.join("0000.out") }).collect();
    let pool = Arc::new(SlotPool::new([lent]));
    let recorded = Arc::new(AtomicUsize::new(0));
    let mut waiter = None;
    let mut seen = Vec::new();
    let scratch = work.path().join("cases");
    let sub = Submission { lang, src: &src, tasks: &[task], checker: &Checker::Diff };
    judge.run_cases(&sub, &cases, &Slots { own, pool: Some(&pool), scratch: &scratch }, |c, r| {
        seen.push((c.case, r.result.stdout.trim().to_string()));
        // After the third result another claim asks for a slot.
        if recorded.fetch_add(1, Ordering::SeqCst) == 2 {
            let (pool, recorded) = (Arc::clone(&pool), Arc::clone(&recorded));
            waiter = Some(std::thread::spawn(move || {
                let i = pool.take();
                (i, recorded.load(Ordering::SeqCst))
            }));
        }
        true
    });
    let (got, at) = waiter.expect("never asked").join().unwrap();
    assert_eq!(got, lent);
    // Asked after the third result, given back after the case then running
    // on it (at most a couple more results); kept, it would come back only
    // when the cases ran out (ten or more results).
    assert!(at <= 8, "the waiting claim got its slot after {at} of 12 results");
    let mut cases_seen: Vec<usize> = seen.iter().map(|(c, _)| *c).collect();
    cases_seen.sort_unstable();
    assert_eq!(cases_seen, (0..12).collect::<Vec<_>>(), "each case recorded once");
    if is_root() {
        let uids: std::collections::BTreeSet<&str> = seen.iter().map(|(_, u)| u.as_str()).collect();
        let want: std::collections::BTreeSet<String> =
            [own.uid, Slot::for_index(lent).uid].iter().map(|u| u.to_string()).collect();
        assert_eq!(uids, want.iter().map(|s| s.as_str()).collect(), "the cases ran on both slots");
    }
}

#[test]
fn each_run_gets_its_own_memory_and_task_limits_in_a_reused_helper() {
    if !is_root() {
        return skip("the cgroup needs root");
    }
    use ojrunner::sandbox::{self, Fired};
    let dir = TempDir::new("limits");
    let run = |memory_mib: u64, processes: u64, script: &str| {
        let argv = ["/usr/bin/python3", "-c", script];
        sandbox::run(slot_spec(&argv, dir.path(), 69, memory_mib, processes)).unwrap()
    };
    let touch = "b = b'x' * (100 << 20)";
    let threads = "import threading, time\nts = [threading.Thread(target=time.sleep, args=(0.2,)) for _ in range(8)]\n[t.start() for t in ts]\n[t.join() for t in ts]";
    // The same helper serves all five runs; each must get its own limits.
    let small = run(64, 16, touch);
    assert_eq!(small.fired, Some(Fired::Memory), "100 MiB under 64 MiB: {small:?}");
    let big = run(256, 16, touch);
    assert_eq!((big.fired, big.exit), (None, sandbox::Exit::Code(0)), "100 MiB under 256 MiB: {big:?}");
    let small = run(64, 16, touch);
    assert_eq!(small.fired, Some(Fired::Memory), "64 MiB again: {small:?}");
    let few = run(256, 4, threads);
    assert_ne!(few.exit, sandbox::Exit::Code(0), "8 threads under 4 tasks: {few:?}");
    let many = run(256, 16, threads);
    assert_eq!(many.exit, sandbox::Exit::Code(0), "8 threads under 16 tasks: {many:?}");
}

#[test]
fn a_runs_leftovers_are_gone_when_its_result_is_returned_not_later() {
    // Children with much memory to free take a while to die: the result
    // must wait for that, not come back while they are still dying.
    let source = r#"
import os, time
for _ in range(6):
    if os.fork() == 0:
        ballast = b"x" * (100 << 20)
        time.sleep(60)
        os._exit(0)
time.sleep(0.5)
print("parent done", flush=True)
"#;
    let dir = TempDir::new("leftovers");
    let p = problem(&dir, 3000, 1 << 20, "", "parent done\n");
    let got = judge("python3", source, &p, 70);
    let r = got.first();
    assert_eq!(r.status, Verdict::AC, "{r:?}");
    if is_root() {
        assert_eq!(processes_of(Slot::for_index(70).uid), Vec::<i32>::new(), "a leftover was alive at the result");
    }
}

#[test]
fn a_jailed_program_that_cannot_start_is_the_judges_error_with_the_reason() {
    if !is_root() {
        return skip("no jail without root (sandbox.rs tests the basic level)");
    }
    use ojrunner::sandbox;
    let dir = TempDir::new("nostart");
    std::fs::write(dir.path().join("not-executable"), "#!/bin/sh\nexit 0\n").unwrap();
    let run = |argv0: &str| sandbox::run(slot_spec(&[argv0], dir.path(), 71, 64, 16));
    // exec fails (ENOENT, EACCES): the program never ran, the judge says why.
    let exec_failed = |e: &sandbox::Error| {
        matches!(e, sandbox::Error::CannotStart { during: Some(sandbox::error::Starting::Exec), .. })
    };
    let e = run("./no-such-program").unwrap_err();
    assert!(exec_failed(&e), "{e:?}");
    let e = e.to_string();
    assert!(e.contains("no-such-program") && e.contains("No such file"), "{e}");
    let e = run("./not-executable").unwrap_err();
    assert!(exec_failed(&e), "{e:?}");
    let e = e.to_string();
    assert!(e.contains("not-executable") && e.contains("ermission denied"), "{e}");
    // And the helper is fine for the next run.
    assert_eq!(run("/bin/true").unwrap().exit, sandbox::Exit::Code(0));
}

#[test]
fn a_run_whose_init_is_killed_goes_once_to_a_new_helper_then_is_the_judges_error() {
    if !is_root() {
        return skip("no jail, no init, without root");
    }
    use ojrunner::sandbox::{self, Exit};
    // A fresh jail per run, whose init this is (the kept jail has none: its
    // helper supervises the run, and its keeper's death is helpers.rs's).
    // nextest runs each test in a process of its own.
    std::env::set_var("OJ_FRESH_JAIL", "1");
    sandbox::helper::shutdown();
    let dir = TempDir::new("initdeath");
    let run = std::thread::spawn({
        let dir = dir.path().to_path_buf();
        move || {
            // Files, as a judged case has (pipes could not be put back).
            let file =
                |n: &str| std::fs::File::options().read(true).write(true).create(true).truncate(true).open(dir.join(n));
            let (stdin, stdout, stderr) = (file("in").unwrap(), file("out").unwrap(), file("err").unwrap());
            let spec = slot_spec(&["/bin/sleep", "30.25"], &dir, 78, 64, 16);
            sandbox::run(sandbox::Spec { stdin, stdout, stderr, ..spec })
        }
    });
    let field = |pid: &str, key: &str| {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        status.lines().find_map(|l| l.strip_prefix(key)).map(|v| v.trim().to_string())
    };
    // The sleeper, found by its unique argument: its parent is the run's
    // init, PID 1 of the run's namespace, a child of a helper of this
    // process (not `old`).
    let init_of_the_sleeper = |old: Option<&str>| {
        let (init, helper) = testkit::wait_for("the sleeper to start", Duration::from_secs(30), || {
            std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
                let pid = e.file_name().into_string().ok()?;
                let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
                (cmdline == b"/bin/sleep\x0030.25\x00").then_some(())?;
                let init = field(&pid, "PPid:")?;
                let helper = field(&init, "PPid:")?;
                (Some(helper.as_str()) != old).then_some((init, helper))
            })
        });
        assert!(field(&init, "NSpid:").is_some_and(|n| n.ends_with("\t1")), "not the run's init");
        assert_eq!(field(&helper, "PPid:"), Some(std::process::id().to_string()), "not our helper");
        (init, helper)
    };
    let gone = |helper: &str| {
        testkit::wait_for("the helper to exit", Duration::from_secs(30), || {
            (!Path::new(&format!("/proc/{helper}")).exists()
                || field(helper, "State:").is_some_and(|s| s.starts_with('Z')))
            .then_some(())
        })
    };
    let t = Instant::now();
    let (init, first) = init_of_the_sleeper(None);
    // SAFETY: kill takes no pointer.
    assert_eq!(unsafe { libc::kill(init.parse().unwrap(), libc::SIGKILL) }, 0);
    // The judge's fault, not the program's: run again, in a new helper; the
    // first retires (what init shared with it may be half-changed).
    let (init, second) = init_of_the_sleeper(Some(&first));
    gone(&first);
    // SAFETY: kill takes no pointer.
    assert_eq!(unsafe { libc::kill(init.parse().unwrap(), libc::SIGKILL) }, 0);
    // Once only: then it is the judge's error, at once.
    let e = run.join().unwrap().expect_err("a run that lost its init twice");
    assert!(
        matches!(&e, sandbox::Error::Lost { why, .. } if matches!(**why, sandbox::Error::InitDied { .. })),
        "{e:?}"
    );
    assert!(e.to_string().contains("init") && e.to_string().contains("during the run"), "{e}");
    assert!(t.elapsed() < Duration::from_secs(25), "the run waited for its program: {:?}", t.elapsed());
    gone(&second);
    // A run on the slot after it works.
    let next = sandbox::run(slot_spec(&["/bin/true"], dir.path(), 78, 64, 16)).unwrap();
    assert_eq!(next.exit, Exit::Code(0));
}

/// A job for `judge-exec run` in `dir`: the source `name` and one case with
/// an empty input; the source's path and the cases' directory.
fn standalone_job(dir: &TempDir, name: &str, source: &str, answer: &str) -> (PathBuf, PathBuf) {
    let tests = dir.path().join("tests");
    std::fs::create_dir(&tests).unwrap();
    std::fs::write(tests.join("0000.in"), "").unwrap();
    std::fs::write(tests.join("0000.out"), answer).unwrap();
    let src = dir.path().join(name);
    std::fs::write(&src, source).unwrap();
    (src, tests)
}

#[test]
fn a_judge_with_a_low_hard_stack_limit_still_judges() {
    use std::os::unix::process::CommandExt;
    // Every run asks for an unlimited stack. A judge started with a lower
    // hard limit (a service manager's LimitSTACK=) cannot raise it without
    // CAP_SYS_RESOURCE: the runs get its own, with a warning, and are judged.
    let dir = TempDir::new("lowstack");
    let (src, tests) =
        standalone_job(&dir, "ok.c", "#include <stdio.h>\nint main(void) { puts(\"ok\"); return 0; }\n", "ok\n");
    let mut judge = testkit::judge_exec_cmd("c11", &src, &tests);
    // SAFETY: the closure only calls setrlimit (async-signal-safe) on a local: nothing allocates between fork and
    // exec.
    unsafe {
        judge.pre_exec(|| {
            let low = libc::rlimit { rlim_cur: 8 << 20, rlim_max: 16 << 20 };
            if libc::setrlimit(libc::RLIMIT_STACK, &low) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
    let out = judge.output().unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains(r#""status":"AC","summary":true"#), "{stdout}\n{stderr}");
    if is_root() && !ojrunner::sandbox::has_cap_sys_resource() {
        assert!(stderr.contains("RLIMIT_STACK capped at 16777216"), "no warning: {stderr}");
    }
}

#[test]
fn a_run_is_stopped_when_its_judge_is_killed() {
    if !is_root() {
        return skip("the run's processes are found by their slot uid");
    }
    use std::process::Stdio;
    // A sleeper with roomy limits (20 s CPU, a minute of wall time), judged
    // by a standalone judge-exec that is then killed: its sandbox helper's
    // socket closes, and the run must end then, not at its limits.
    let dir = TempDir::new("orphaned");
    let (src, tests) = standalone_job(&dir, "sleeper.py", "import time\ntime.sleep(120)\n", "");
    let uid = Slot::for_index(0).uid;
    assert_eq!(processes_of(uid), Vec::<i32>::new(), "slot 0 is busy before the test");
    let mut judge = testkit::judge_exec_cmd("python3", &src, &tests)
        .args(["--time", "20000"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    testkit::wait_for("the sleeper to start", Duration::from_secs(20), || {
        (!processes_of(uid).is_empty()).then_some(())
    });
    judge.kill().unwrap();
    judge.wait().unwrap();
    testkit::wait_for("the run to end with its judge", Duration::from_secs(10), || {
        processes_of(uid).is_empty().then_some(())
    });
}

#[test]
fn a_timed_run_carries_the_moment_each_of_its_steps_ended_in_order() {
    use ojrunner::sandbox::{self, timeline::Mark};
    let dir = TempDir::new("timed");
    let run = || sandbox::run(slot_spec(&["/bin/true"], dir.path(), 76, 64, 16)).unwrap();
    // Off (the default), a run carries nothing back.
    assert_eq!(run().steps, None);
    sandbox::set_timed(true);
    let (first, second) = (run(), run());
    sandbox::set_timed(false);
    let t = second.steps.expect("a timed run without its steps");
    // Every step of a run the judge, the helper, init and the program stamp.
    let mut reached = vec![Mark::Called, Mark::Sent, Mark::Received, Mark::SlotLocked, Mark::Prepared];
    if is_root() && sandbox::probe_namespaces() {
        reached.extend([Mark::Checked, Mark::CgroupReset, Mark::InitStarted, Mark::RootEntered]);
        reached.extend([Mark::ProgramStarted, Mark::Credentials, Mark::Filtered, Mark::Execed]);
        // The first run's cleanup after its reply, reported by the second.
        reached.extend([Mark::Resumed, Mark::LastReplied, Mark::LastInitReaped, Mark::LastTidied]);
    }
    reached.extend([Mark::Exited, Mark::Reaped, Mark::Measured, Mark::Answered, Mark::Returned]);
    for m in &reached {
        assert_ne!(t.at[*m as usize], 0, "{m:?} was not stamped: {t:?}");
    }
    // One clock for the host: the marks reached come in the order of the
    // run, and the last run's cleanup in its own (it may overlap this run's
    // request).
    let (last, this) = Mark::ALL.split_at(Mark::Called as usize);
    for chain in [last, this] {
        let at: Vec<u64> = chain.iter().map(|m| t.at[*m as usize]).filter(|&ns| ns != 0).collect();
        assert!(at.windows(2).all(|w| w[0] <= w[1]), "{chain:?}: {t:?}");
    }
    let whole = t.at[Mark::Returned as usize] - t.at[Mark::Called as usize];
    let steps: u128 =
        t.steps().iter().skip_while(|(m, _)| (*m as usize) <= Mark::Called as usize).map(|(_, d)| d.as_nanos()).sum();
    assert_eq!(steps, whole as u128, "the steps of a run add up to it");
    assert!(first.steps.is_some());
}

#[test]
fn a_run_sees_its_own_mounts_only_each_with_its_flags() {
    if !is_root() {
        return skip("the jailed level needs root");
    }
    use ojrunner::sandbox::{self, Bind, Exit};
    use std::io::{Read, Seek};
    let (src, out, host) = (TempDir::new("mounts-src"), TempDir::new("mounts-out"), TempDir::new("mounts-host"));
    std::fs::write(src.path().join("input"), "1 2\n").unwrap();
    let mut spec = slot_spec(&["/bin/cat", "/proc/self/mountinfo"], src.path(), 56, 64, 16);
    // A read-only directory, a writable one, a file, and a directory at its
    // host path (below `/tmp` here: made in the run's own `/tmp`).
    spec.binds = vec![
        Bind::at(src.path(), "/src", false),
        Bind::at(out.path(), "/out", true),
        Bind::at(&src.path().join("input"), "/judge/input", false),
        Bind { path: host.path().to_path_buf(), writable: false, at: None },
    ];
    let mut stdout = tempfile_in(out.path());
    spec.stdout = stdout.try_clone().unwrap();
    let usage = sandbox::run(spec).unwrap();
    assert_eq!(usage.exit, Exit::Code(0), "{usage:?}");
    let mut mountinfo = String::new();
    stdout.rewind().unwrap();
    stdout.read_to_string(&mut mountinfo).unwrap();
    // Each mount point and its per-mount options (the fifth and sixth fields).
    let mounts: Vec<(&str, Vec<&str>)> = mountinfo
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            (f[4], f[5].split(',').filter(|o| !o.ends_with("atime")).collect())
        })
        .collect();
    let flags_of = |at: &str| {
        let found: Vec<_> = mounts.iter().filter(|(p, _)| *p == at).collect();
        assert_eq!(found.len(), 1, "{at} is not mounted once:\n{mountinfo}");
        found[0].1.join(",")
    };
    assert_eq!(flags_of("/"), "ro,nosuid", "{mountinfo}");
    assert_eq!(flags_of("/usr"), "ro,nosuid,nodev", "{mountinfo}");
    assert_eq!(flags_of("/usr/local/etc"), "ro,nosuid,nodev,noexec", "{mountinfo}");
    assert_eq!(flags_of("/etc/ld.so.cache"), "ro,nosuid,nodev", "{mountinfo}");
    assert_eq!(flags_of("/tmp"), "rw,nosuid,nodev", "{mountinfo}");
    assert_eq!(flags_of("/proc"), "ro,nosuid,nodev,noexec", "{mountinfo}");
    assert_eq!(flags_of("/src"), "ro,nosuid,nodev", "{mountinfo}");
    assert_eq!(flags_of("/out"), "rw,nosuid,nodev", "{mountinfo}");
    assert_eq!(flags_of("/judge/input"), "ro,nosuid,nodev", "{mountinfo}");
    assert_eq!(flags_of(host.path().to_str().unwrap()), "ro,nosuid,nodev", "{mountinfo}");
    // Nothing of the host's tree but what the template and the binds are.
    let expected_tops = ["usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc", "dev", "tmp", "proc"];
    for (at, _) in &mounts {
        let top = at.trim_start_matches('/').split('/').next().unwrap();
        let ours = ["src", "out", "judge"].contains(&top);
        assert!(*at == "/" || ours || expected_tops.contains(&top), "{at} is mounted in the run:\n{mountinfo}");
    }
    for host_path in ["/run/ojrunner", "/sys", "/dev/shm", "/dev/pts", "/home", "/root"] {
        assert!(!mounts.iter().any(|(p, _)| *p == host_path), "{host_path} is seen:\n{mountinfo}");
    }
}

/// An unnamed file in `dir`, read and write.
fn tempfile_in(dir: &Path) -> std::fs::File {
    let p = dir.join(format!("ojt-scratch-{}-{:?}", std::process::id(), Instant::now()));
    let f = std::fs::File::options().read(true).write(true).create_new(true).open(&p).unwrap();
    std::fs::remove_file(&p).unwrap();
    f
}
