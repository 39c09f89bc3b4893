//! The compile cache (`lib/src/compile_cache.rs`, issue #26 item 3) with
//! real compilers and real sandboxes: a hit compiles nothing, a change
//! misses, concurrent claims compile once, a killed judge leaves no entry
//! that is used, the least recently used go first, a run cannot write the
//! cache; and a rejudge through a real hubd and runner compiles nothing.
//!
//! "Compiles nothing" is proved two ways: the judge's own log line for a hit
//! (counted per thread by this binary's logger), and a second judge whose
//! compile limits no compile of the source could pass (4 MiB of memory):
//! only a hit makes it AC, and the same judge without the entry gives CE.

use ojrunner::checker::Checker;
use ojrunner::compile_cache::CompileCache;
use ojrunner::judge::{Case, CaseRun, Compiled, Judge, Slot, Slots, Submitted};
use ojrunner::language::Languages;
use ojrunner::protocol::{Task, Verdict};
use std::cell::Cell;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;
use testkit::*;

/// A+B in C++ with the whole standard library.
const AB_CPP: &str = "#include <bits/stdc++.h>\nint main() { long long a, b; std::cin >> a >> b; \
                      std::cout << a + b << '\\n'; }\n";

thread_local! {
    /// Hits logged by this thread's judge ("compile cache: hit").
    static HITS: Cell<usize> = const { Cell::new(0) };
}

/// Counts the judge's hit lines, per thread (the compile runs in the
/// thread that calls `judge_all`).
struct HitCounter;

impl log::Log for HitCounter {
    fn enabled(&self, _: &log::Metadata) -> bool {
        true
    }
    fn log(&self, record: &log::Record) {
        if record.args().to_string().starts_with("compile cache: hit") {
            HITS.with(|h| h.set(h.get() + 1));
        }
    }
    fn flush(&self) {}
}

fn count_hits() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        log::set_logger(&HitCounter).unwrap();
        log::set_max_level(log::LevelFilter::Info);
    });
}

/// One judging of `source` (cpp17, or `lang` of `table`) on A+B's one case
/// by `judge` as slot `slot`: how the compile went, the verdict, and how
/// many hits the judge logged.
fn judge_ab(judge: &Judge, lang: &str, source: &str, slot: usize, work: &Path) -> (Compiled, Verdict, usize) {
    judge_in(judge, &Languages::builtin(), lang, source, slot, work)
}

fn judge_in(
    judge: &Judge,
    table: &Languages,
    lang: &str,
    source: &str,
    slot: usize,
    work: &Path,
) -> (Compiled, Verdict, usize) {
    count_hits();
    let lang = table.by_name(lang).unwrap();
    let dir = work.join(format!("job-{slot}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let src = source_dir(&dir, &lang.source, source);
    let problem = one_case_problem(&dir, "ab", 2000, "20 22\n", "42\n");
    let tasks = [Task { task_score: 100, memory_limit: 262144, time_limit: 2000, case_count: 1 }];
    let cases = [Case { task: 0, case: 0, input: problem.join("0000.in"), answer: problem.join("0000.out") }];
    let job = Submitted { lang: Ok(lang), src: &src, tasks: &tasks, checker: Ok(Checker::Diff) };
    let scratch = dir.join("cases");
    let slots = Slots { own: Slot::for_index(slot), pool: None, scratch: &scratch };
    let before = HITS.with(Cell::get);
    let mut verdict = Verdict::JE;
    let compiled = judge.judge_all(&job, &cases, &slots, |_, r: CaseRun| {
        verdict = r.result.status;
        true
    });
    let _ = std::fs::remove_dir_all(&dir);
    (compiled, verdict, HITS.with(Cell::get) - before)
}

/// A judge with the cache in `dir` (1 GiB).
fn cached(dir: &Path) -> Judge {
    Judge { compile_cache: CompileCache::new(dir.to_path_buf(), 1 << 30), ..Judge::default() }
}

/// The same, with compile limits no compile passes: only a hit is AC.
fn cannot_compile(dir: &Path) -> Judge {
    Judge { compile_memory: 4 << 20, ..cached(dir) }
}

/// The cache's entries (not locks, not builds).
fn entries(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir() && !p.to_string_lossy().contains('.'))
        .collect();
    v.sort();
    v
}

fn is_ce(c: &Compiled) -> bool {
    matches!(c, Compiled::Failed { .. })
}

#[test]
fn a_hit_compiles_nothing_and_a_changed_source_or_command_misses() {
    let work = TempDir::new("cc-hit");
    let cache = work.path().join("programs");
    let (c, v, hits) = judge_ab(&cached(&cache), "cpp17", AB_CPP, 90, work.path());
    assert_eq!((c, v, hits), (Compiled::Ready, Verdict::AC, 0), "the first judging compiles");
    assert_eq!(entries(&cache).len(), 1);
    // Judged again by a judge that could not compile it: AC, from the cache.
    let (c, v, hits) = judge_ab(&cannot_compile(&cache), "cpp17", AB_CPP, 90, work.path());
    assert_eq!((c, v, hits), (Compiled::Ready, Verdict::AC, 1), "a hit");
    // The same judge without the entry: CE (the test can fail).
    let (c, _, hits) = judge_ab(&cannot_compile(&work.path().join("empty")), "cpp17", AB_CPP, 90, work.path());
    assert!(is_ce(&c) && hits == 0, "{c:?}");
    // A changed source misses (one space more).
    let changed = AB_CPP.replace("int main", "int  main");
    let (c, _, hits) = judge_ab(&cannot_compile(&cache), "cpp17", &changed, 90, work.path());
    assert!(is_ce(&c) && hits == 0, "a changed source was a hit: {c:?}");
    // So does another language of the same command (cpp20 is c++20) and
    // a changed command (-O1 for -O2) under the same name.
    let (c, _, hits) = judge_ab(&cannot_compile(&cache), "cpp20", AB_CPP, 90, work.path());
    assert!(is_ce(&c) && hits == 0, "another language was a hit: {c:?}");
    let mut table: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(repo().join("etc/languages.json")).unwrap()).unwrap();
    for l in table["languages"].as_array_mut().unwrap() {
        if l["name"] == "cpp17" {
            l["compile"][2] = "-O1".into();
        }
    }
    let table = Languages::parse(&table.to_string()).unwrap();
    let (c, _, hits) = judge_in(&cannot_compile(&cache), &table, "cpp17", AB_CPP, 90, work.path());
    assert!(is_ce(&c) && hits == 0, "a changed command was a hit: {c:?}");
    // A compile error is not cached: judged again, it compiles again.
    let bad = "int main() { return x; }\n";
    for _ in 0..2 {
        let (c, _, hits) = judge_ab(&cached(&cache), "cpp17", bad, 90, work.path());
        assert!(is_ce(&c) && hits == 0, "{c:?}");
    }
    assert_eq!(entries(&cache).len(), 1);
}

#[test]
fn two_claims_of_one_source_at_once_compile_it_once() {
    let work = TempDir::new("cc-twice");
    let cache = work.path().join("programs");
    let judge = cached(&cache);
    let results: Vec<(Compiled, Verdict, usize)> = std::thread::scope(|s| {
        let a = s.spawn(|| judge_ab(&judge, "cpp17", AB_CPP, 91, work.path()));
        let b = s.spawn(|| judge_ab(&judge, "cpp17", AB_CPP, 92, work.path()));
        vec![a.join().unwrap(), b.join().unwrap()]
    });
    for (c, v, _) in &results {
        assert_eq!((c, v), (&Compiled::Ready, &Verdict::AC));
    }
    assert_eq!(results.iter().map(|r| r.2).sum::<usize>(), 1, "one compiled, the other waited and hit");
    assert_eq!(entries(&cache).len(), 1);
    let left: Vec<_> = std::fs::read_dir(&cache).unwrap().flatten().map(|e| e.file_name()).collect();
    assert!(!left.iter().any(|n| n.to_string_lossy().ends_with(".build")), "{left:?}");
}

#[test]
fn the_least_recently_used_entry_goes_to_keep_the_budget() {
    let work = TempDir::new("cc-lru");
    let cache = work.path().join("programs");
    let first = AB_CPP.to_string();
    let (_, v, _) = judge_ab(&cached(&cache), "cpp17", &first, 93, work.path());
    assert_eq!(v, Verdict::AC);
    let one = entries(&cache);
    let size: u64 = walk_size(&one[0]);
    // Room for one entry and a half: the second pushes the first out.
    let judge = Judge { compile_cache: CompileCache::new(cache.clone(), size * 3 / 2), ..Judge::default() };
    let second = format!("{AB_CPP}// another\n");
    let (_, v, _) = judge_ab(&judge, "cpp17", &second, 93, work.path());
    assert_eq!(v, Verdict::AC);
    let two = entries(&cache);
    assert_eq!(two.len(), 1, "{two:?}");
    assert_ne!(two, one, "the older entry went, not the new one");
    // The first is compiled again; the second, used less recently, goes.
    let (_, _, hits) = judge_ab(&judge, "cpp17", &first, 93, work.path());
    assert_eq!(hits, 0);
    assert_eq!(entries(&cache), one);
}

fn walk_size(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| if e.file_type().unwrap().is_dir() { walk_size(&e.path()) } else { e.metadata().unwrap().len() })
        .sum()
}

#[test]
fn a_run_cannot_write_its_program_or_reach_the_cache() {
    let work = TempDir::new("cc-write");
    let cache = work.path().join("programs");
    // Every way a run could alter what the next judging runs; 0: none worked.
    let source = format!(
        r#"#include <stdio.h>
#include <fcntl.h>
#include <sys/stat.h>
int main(void) {{
    int a, b, bad = 0;
    if (scanf("%d %d", &a, &b) != 2) return 1;
    if (open("main", O_WRONLY) >= 0) bad |= 1;
    if (open("/src/main", O_WRONLY | O_TRUNC) >= 0) bad |= 2;
    if (open("extra", O_CREAT | O_WRONLY, 0644) >= 0) bad |= 4;
    if (chmod("main", 0777) == 0) bad |= 8;
    if (open("{}", O_RDONLY) >= 0) bad |= 16;
    printf("%d\n", bad ? -bad : a + b);
    return 0;
}}
"#,
        cache.display()
    );
    for hits in [0, 1] {
        let (c, v, h) = judge_ab(&cached(&cache), "c11", &source, 94, work.path());
        assert_eq!((c, v, h), (Compiled::Ready, Verdict::AC, hits), "a run altered something (its output: -bad)");
    }
    // The entry: root's, nobody's to write, in a directory only root enters.
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode(&cache), 0o700);
    let entry = &entries(&cache)[0];
    assert_eq!(mode(&entry.join("tree/main")), 0o555);
    assert_eq!(mode(&entry.join("tree/main.c")), 0o444);
    assert_eq!(std::fs::metadata(entry.join("tree/main")).unwrap().uid(), euid());
}

fn euid() -> u32 {
    nix::unistd::geteuid().as_raw()
}

/// `judge-exec run` of the C++ A+B with its cache in `cache`.
fn judge_exec_run(cache: &Path, src: &Path, tests: &Path) -> std::process::Child {
    judge_exec_cmd("cpp17", src, tests)
        .arg("--cache")
        .arg(cache)
        .env("RUST_LOG", "info")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn a_judge_killed_mid_compile_leaves_no_entry_and_a_corrupt_entry_is_compiled_again() {
    let work = TempDir::new("cc-kill");
    let cache = work.path().join("programs");
    let src = write_file(work.path(), "ab.cpp", AB_CPP);
    let tests = work.path().join("tests");
    std::fs::create_dir(&tests).unwrap();
    write_file(&tests, "01.in", "20 22\n");
    write_file(&tests, "01.out", "42\n");
    // Killed while its compiler runs (judge-exec run compiles as slot 0).
    let mut child = judge_exec_run(&cache, &src, &tests);
    // (Its own compiler: a runner of another test may compile as slot 0 too.)
    let judge = child.id() as i32;
    let compiling = |pid: i32| {
        std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c == "cc1plus\n")
            && descends_from(pid, judge)
    };
    let slot0 = Slot::for_index(0).uid;
    wait_for("the compiler to run", Duration::from_secs(60), || {
        processes_of(slot0).into_iter().any(compiling).then_some(())
    });
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(entries(&cache), Vec::<PathBuf>::new(), "a killed compile left an entry");
    // The next one compiles and stores a whole entry; the one after hits.
    let out = judge_exec_run(&cache, &src, &tests).wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && !said.contains("compile cache: hit"), "{said}");
    let entry = entries(&cache).pop().expect("an entry");
    assert!(entry.join("manifest").is_file());
    let out = judge_exec_run(&cache, &src, &tests).wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && said.contains("compile cache: hit"), "{said}");
    // An entry cut short (a crash while it was written, a disk's fault):
    // compiled again, never run.
    let main = entry.join("tree/main");
    let len = std::fs::metadata(&main).unwrap().len();
    std::fs::set_permissions(&main, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::File::options().write(true).open(&main).unwrap().set_len(len / 2).unwrap();
    let out = judge_exec_run(&cache, &src, &tests).wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}{}", String::from_utf8_lossy(&out.stdout));
    assert!(said.contains("unusable") && !said.contains("compile cache: hit"), "{said}");
    assert_eq!(std::fs::metadata(&main).unwrap().len(), len, "the entry is whole again");
}

/// Whether `pid`'s parent, or its parent's, and so on, is `ancestor`.
fn descends_from(mut pid: i32, ancestor: i32) -> bool {
    for _ in 0..64 {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let parent = status.lines().find_map(|l| l.strip_prefix("PPid:")).and_then(|v| v.trim().parse().ok());
        match parent {
            Some(p) if p == ancestor => return true,
            Some(p) if p > 1 => pid = p,
            _ => return false,
        }
    }
    false
}

#[test]
fn a_rejudge_through_hubd_and_a_runner_compiles_nothing() {
    let sc = scenario("cc-rejudge", &[]);
    let src = write_file(sc.dir.path(), "ab.cpp", AB_CPP);
    let other = write_file(sc.dir.path(), "ab2.cpp", &format!("{AB_CPP}// another\n"));
    let subs = [sc.hub.submit(1, "cpp17", &src), sc.hub.submit(1, "cpp17", &other)];
    let runner = sc.start_logged(&[]);
    let hits = || sc.log().matches("compile cache: hit").count();
    for s in sc.hub.wait_all_judged(Duration::from_secs(300)) {
        assert_eq!(s["verdict"], "AC", "{s}");
    }
    assert_eq!(hits(), 0, "two sources, two compiles");
    assert_eq!(entries(&sc.spool.join("programs")).len(), 2);
    for s in &subs {
        sc.hub.cli(&["rejudge", s]);
    }
    let judged = sc.hub.wait_all_judged(Duration::from_secs(300));
    for s in &judged {
        assert_eq!(s["verdict"], "AC", "{s}");
    }
    wait_for("both rejudges' hits in the log", Duration::from_secs(30), || (hits() == 2).then_some(()));
    sc.drain(runner);
}
