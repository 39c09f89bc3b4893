//! The sandbox driven in the test's own process, without a runner: a run's
//! spec for a slot, the cases of a task judged as a worker would, and the
//! cgroups the helpers leave; and `judge-exec run` as a user runs it. These runs take the process's own slot uid
//! base (lane 0): only the suites of `make test`'s first phase use them.

use super::scratch::staged_source;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// `tests/hostile/<name>` (C) built by the host's gcc as `dir/prog`, for a
/// run in `dir` to start as `./prog`; optimised, as the judge compiles C.
pub fn built_hostile(name: &str, dir: &Path) {
    let src = super::layout::repo().join("tests/hostile").join(name);
    let built =
        std::process::Command::new("gcc").arg("-O2").arg("-o").arg(dir.join("prog")).arg(&src).status().unwrap();
    assert!(built.success(), "gcc {}", src.display());
}

/// A run in `dir` (its cwd and only bind, read-only) as slot `slot`, stdio
/// on /dev/null, with a memory and a task limit and roomy times.
pub fn slot_spec(argv: &[&str], dir: &Path, slot: usize, memory_mib: u64, processes: u64) -> ojrunner::sandbox::Spec {
    use ojrunner::sandbox::{Bind, Limits, Spec};
    let null = || std::fs::File::options().read(true).write(true).open("/dev/null").unwrap();
    Spec {
        argv: argv.iter().map(|a| a.to_string()).collect(),
        cwd: dir.to_path_buf(),
        env: vec![("PATH".into(), "/usr/bin:/bin".into())],
        stdin: null(),
        stdout: null(),
        stderr: null(),
        identity: ojrunner::judge::Slot::for_index(slot).identity(),
        limits: Limits {
            cpu: Duration::from_secs(5),
            wall: Duration::from_secs(10),
            memory: memory_mib << 20,
            address_space: None,
            stack: None,
            output: 1 << 20,
            processes: Some(processes),
        },
        binds: vec![Bind { path: dir.to_path_buf(), writable: false, at: None }],
    }
}

/// The runs' groups (`helper-<pid>`) of every sandbox helper of this
/// machine's layout (v1: per controller; v2: where `delegation.rs` puts
/// them), found as the sandbox finds its own.
pub fn runs_cgroups() -> Vec<PathBuf> {
    let Some(h) = ojrunner::sandbox::cgroup::Hierarchy::detect() else { return Vec::new() };
    h.parents()
        .into_iter()
        .flat_map(|parent| std::fs::read_dir(parent).into_iter().flatten().flatten())
        .filter(|e| e.file_name().to_string_lossy().starts_with("helper-"))
        .map(|e| e.path())
        .collect()
}

/// Judges `source` in the language `lang` on every case of task 0 in `td`
/// (`00CC.in` with `00CC.out`) with the checker `checker` (a job's name;
/// `None` is diff), as worker `slot` would below `judge-exec`: prepares
/// the checker, compiles, runs each case in `work/cases/00CC/` under
/// `time_ms` of CPU. For the suites of checkers and interactors.
pub fn judge_cases(
    work: &Path,
    lang: &str,
    source: &str,
    td: &Path,
    checker: Option<&str>,
    time_ms: i64,
    slot: usize,
) -> Vec<ojrunner::judge::CaseRun> {
    use ojrunner::judge::{Case, Compiled, Judge, Slot, Submission};
    use ojrunner::protocol::Task;
    let j = Judge::default();
    let langs = ojrunner::language::Languages::builtin();
    let lang = langs.by_name(lang).unwrap();
    let slot = Slot::for_index(slot);
    let checker =
        j.prepare_checker(checker, td, &work.join("cache"), &slot).unwrap_or_else(|e| panic!("{checker:?}: {e}"));
    let src = staged_source(work, &lang.source, source);
    assert_eq!(j.compile(lang, &src, &slot), Compiled::Ready);
    let count = std::fs::read_dir(td)
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().extension().is_some_and(|x| x == "in"))
        .count();
    let task = Task { task_score: 100, memory_limit: 65536, time_limit: time_ms, case_count: count as i64 };
    (0..count)
        .map(|c| {
            let scratch = work.join("cases").join(format!("00{c:02}"));
            let _ = std::fs::remove_dir_all(&scratch);
            std::fs::create_dir_all(&scratch).unwrap();
            let (input, answer) = (td.join(format!("00{c:02}.in")), td.join(format!("00{c:02}.out")));
            let sub = Submission { lang, src: &src, tasks: std::slice::from_ref(&task), checker: &checker };
            j.run_case(&sub, &Case { task: 0, case: c, input, answer }, &slot, &scratch)
        })
        .collect()
}

/// `judge-exec run --lang LANG --src SRC --tests TESTS`, to add to and run.
pub fn judge_exec_cmd(lang: &str, src: &Path, tests: &Path) -> std::process::Command {
    let mut cmd = std::process::Command::new(super::layout::bin("judge-exec"));
    cmd.args(["run", "--lang", lang, "--src"]).arg(src).arg("--tests").arg(tests);
    cmd
}

/// `judge-exec run --lang c11 --src SRC --tests TESTS ARGS…`, as a user
/// runs it: its exit code, its JSON lines, its stderr.
pub fn judge_exec_run(src: &Path, tests: &Path, args: &[&str]) -> (i32, Vec<serde_json::Value>, String) {
    let out = judge_exec_cmd("c11", src, tests).args(args).output().unwrap();
    let lines = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect();
    (out.status.code().unwrap_or(-1), lines, String::from_utf8_lossy(&out.stderr).into_owned())
}
