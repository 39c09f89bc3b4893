//! `judge-exec run`: judging without a hub or a spool, for problem setters
//! and shell pipelines. One JSON line per case (the fields of a case in the
//! `complete` payload, plus its name and the limit that stopped it), then a
//! summary line. The checker is named as a job's `checker` field names it
//! (`checker.rs`); `special` and `interactive` take their sources from the
//! tests directory and are compiled into the run's work directory. The
//! tests directory may be an ICPC problem package instead (`problem.yaml`),
//! judged as `hubd problem add` maps it. The cases run side by side, a slot
//! per core; their lines come in order.

use crate::compile_cache::CompileCache;
use crate::judge::{Case, CaseRun, Judge, Slot, Slots, Submitted};
use crate::language::{Languages, Toolchain};
use crate::protocol::Verdict;
use crate::sandbox::slot::SlotPool;
use log::error;
use ojrunner_daemon::ExitCode;
use ojrunner_protocol::icpc;
use serde_json::json;
use std::path::{Path, PathBuf};

/// Where `judge-exec run` keeps compiled sources when `--cache` is not
/// given: `$XDG_CACHE_HOME/ojrunner/programs`, else
/// `$HOME/.cache/ojrunner/programs`; `None` with neither set.
pub fn default_cache() -> Option<PathBuf> {
    let abs = |v: std::ffi::OsString| Some(PathBuf::from(v)).filter(|p| p.is_absolute());
    std::env::var_os("XDG_CACHE_HOME")
        .and_then(abs)
        .or_else(|| std::env::var_os("HOME").and_then(abs).map(|h| h.join(".cache")))
        .map(|c| c.join("ojrunner/programs"))
}

/// `judge-exec run [--checker NAME]`: judges a source against a directory
/// of cases, printing JSON lines; exits 0 when every case is AC, 1
/// otherwise. The checker is the one `checker` names (`None`: diff, or an
/// ICPC package's own); one that cannot be prepared (a malformed name, no
/// source in `tests`, a compile error) makes every case JE with the
/// reason.
///
/// `tests` is a directory of `TTCC.in`/`TTCC.out` (one task), or an ICPC
/// problem package (it has a `problem.yaml`), mapped as `hubd problem add`
/// maps it ([`ojrunner_protocol::icpc`]): its tasks, limits and checker,
/// `time` and `mem` (and `checker`) overriding its own when given; its
/// cases are named by their paths in the package. `cache`: where the
/// compiled source is looked for and kept (`compile_cache.rs`).
#[allow(clippy::too_many_arguments)]
pub fn run(
    languages: &Languages,
    lang: &str,
    src: &Path,
    tests: &Path,
    time: Option<i64>,
    mem: Option<i64>,
    checker: Option<&str>,
    cache: Option<CompileCache>,
) -> ExitCode {
    let Some(lang) = lang.parse::<i64>().ok().and_then(|i| languages.by_id(i)).or_else(|| languages.by_name(lang))
    else {
        error!("unknown language {lang:?}");
        return ExitCode::Usage;
    };
    // What a runner takes of a job's code: the code zip's bound.
    let code = match ojrunner_daemon::user_file::read_user_file(src, crate::protocol::archive::CODE.max_bytes, "source")
    {
        Ok(code) => code,
        Err(e) => {
            error!("{}: {e}", src.display());
            return ExitCode::Usage;
        }
    };
    if let Err(e) = crate::sandbox::place_cgroups() {
        error!("{e}");
        return ExitCode::Config;
    }
    let work = std::env::temp_dir().join(format!("judge-exec-run-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    let layout = if icpc::is_package(tests) {
        package_layout(tests, &work.join("testdata"), time, mem)
    } else {
        plain_layout(tests, time.unwrap_or(1000), mem.unwrap_or(262144))
    };
    let layout = match layout {
        Ok(l) => l,
        Err(e) => {
            error!("{}: {e}", tests.display());
            let _ = std::fs::remove_dir_all(&work);
            return ExitCode::Usage;
        }
    };
    let srcdir = work.join("src");
    let copied = std::fs::create_dir_all(&srcdir).and_then(|_| std::fs::write(srcdir.join(&lang.source), &code));
    if let Err(e) = copied {
        error!("{}: {e}", src.display());
        let _ = std::fs::remove_dir_all(&work);
        return ExitCode::Usage;
    }
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::set_permissions(&work, std::fs::Permissions::from_mode(0o711));
    let judge = Judge { compile_cache: cache, ..Judge::default() };
    let slot = Slot::for_index(0);
    let checker = checker.or(layout.checker.as_deref());
    let submitted = Submitted {
        lang: Ok(lang),
        src: &srcdir,
        tasks: &layout.tasks,
        checker: judge.prepare_checker(checker, &layout.testdata, &work.join("checkers"), &slot),
    };
    // Side by side on slot 0 and one more slot per core (a runner's
    // judge-exec on this host holding one makes it wait: slot locks);
    // printed in the cases' order.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let pool = SlotPool::new(1..cores);
    let slots = Slots { own: slot, pool: Some(&pool), scratch: &work.join("cases") };
    let mut worst = Verdict::AC;
    let mut ready = std::collections::BTreeMap::new();
    let mut printed = 0;
    let Layout { cases, names, .. } = &layout;
    // Where each task's cases start in the printed order.
    let first: Vec<usize> =
        layout.tasks.iter().scan(0, |n, t| Some(std::mem::replace(n, *n + t.case_count as usize))).collect();
    judge.judge_all(&submitted, cases, &slots, |c, run| {
        ready.insert(first.get(c.task).map_or(printed, |f| f + c.case), run);
        while let Some(CaseRun { result: r, limit, .. }) = ready.remove(&printed) {
            worst = worst.worst(r.status);
            let mut v = serde_json::to_value(&r).unwrap();
            v["case"] = json!(names[printed]);
            if layout.tasks.len() > 1 {
                v["task"] = json!(cases[printed].task);
            }
            v["limit"] = json!(limit);
            println!("{v}");
            printed += 1;
        }
        true
    });
    println!("{}", json!({"summary": true, "cases": names.len(), "status": worst}));
    let _ = std::fs::remove_dir_all(&work);
    if worst == Verdict::AC {
        ExitCode::Ok
    } else {
        ExitCode::Failure
    }
}

/// What `judge-exec run` judges: the tasks, each case and its name, the
/// testdata directory (where a checker's source is found) and the
/// checker a package names.
struct Layout {
    tasks: Vec<crate::protocol::Task>,
    cases: Vec<Case>,
    names: Vec<String>,
    testdata: PathBuf,
    checker: Option<String>,
}

/// A directory of `NAME.in`/`NAME.out` cases, in name order: one task.
fn plain_layout(tests: &Path, time: i64, mem: i64) -> Result<Layout, String> {
    let mut names: Vec<String> = std::fs::read_dir(tests)
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_str().and_then(|n| n.strip_suffix(".in")).map(String::from))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    if names.is_empty() {
        return Err("no TTCC.in cases".into());
    }
    // A case that is a FIFO or a device would hang the judge or never end.
    for name in &names {
        for file in [tests.join(format!("{name}.in")), tests.join(format!("{name}.out"))] {
            if std::fs::metadata(&file).is_ok_and(|m| !m.is_file()) {
                return Err(format!("{}: not a regular file", file.display()));
            }
        }
    }
    let task =
        crate::protocol::Task { task_score: 100, memory_limit: mem, time_limit: time, case_count: names.len() as i64 };
    let cases = names
        .iter()
        .enumerate()
        .map(|(i, name)| Case {
            task: 0,
            case: i,
            input: tests.join(format!("{name}.in")),
            answer: tests.join(format!("{name}.out")),
        })
        .collect();
    Ok(Layout { tasks: vec![task], cases, names, testdata: tests.to_path_buf(), checker: None })
}

/// An ICPC problem package, laid out in `testdata` as a runner would
/// unpack it; each case named by its input's path in the package.
fn package_layout(dir: &Path, testdata: &Path, time: Option<i64>, mem: Option<i64>) -> Result<Layout, String> {
    let package = icpc::read(dir, time).map_err(|e| e.to_string())?;
    package.lay_out(testdata).map_err(|e| e.to_string())?;
    let mut tasks = package.tasks.clone();
    for t in &mut tasks {
        t.memory_limit = mem.unwrap_or(t.memory_limit);
    }
    crate::protocol::check_tasks(&tasks).map_err(|e| e.to_string())?;
    let named: std::collections::HashMap<&str, &Path> =
        package.files.iter().map(|(name, from)| (name.as_str(), from.as_path())).collect();
    let (mut cases, mut names) = (Vec::new(), Vec::new());
    for (t, task) in tasks.iter().enumerate() {
        for c in 0..task.case_count as usize {
            let input = format!("{t:02}{c:02}.in");
            let shown = named.get(input.as_str()).and_then(|p| p.strip_prefix(dir).ok()).unwrap_or(Path::new(&input));
            names.push(shown.with_extension("").to_string_lossy().into_owned());
            cases.push(Case {
                task: t,
                case: c,
                input: testdata.join(&input),
                answer: testdata.join(format!("{t:02}{c:02}.out")),
            });
        }
    }
    Ok(Layout { tasks, cases, names, testdata: testdata.to_path_buf(), checker: Some(package.checker) })
}

/// `judge-exec --probe`: prints, as one JSON object, the sandbox mechanisms
/// this machine gives the judge, then proves them with one sandboxed run of
/// `/bin/true`. Exits 0 if that run worked.
pub fn probe(languages: &crate::language::Languages) -> ExitCode {
    let placed = crate::sandbox::place_cgroups();
    let m = crate::sandbox::probe_mechanisms();
    let seccomp = std::fs::read_to_string("/proc/sys/kernel/seccomp/actions_avail").unwrap_or_default();
    let user_notif = seccomp.split_whitespace().any(|a| a == "user_notif");
    let slot = Slot::for_index(0);
    let trial = crate::sandbox::Spec::trial(&["/bin/true"], slot.identity()).map(crate::sandbox::run);
    let trial = match trial {
        Ok(Ok(u)) => json!({"ok": u.exit == crate::sandbox::Exit::Code(0), "exit": u.exit.code(),
            "wall_us": u.wall.as_micros() as u64, "memory_kib": u.memory / 1024}),
        Ok(Err(e)) => json!({"ok": false, "error": e.to_string()}),
        Err(e) => json!({"ok": false, "error": e.to_string()}),
    };
    let ok = trial["ok"] == json!(true);
    let jailed = m.namespaces && slot.identity().is_some();
    let v = json!({
        "helper": true,
        "identity": slot.identity().map(|i| i.uid),
        "namespaces": if jailed { json!(["pid", "mount", "ipc", "uts", "net"]) } else { json!([]) },
        "network_namespace": if !jailed {
            json!(null)
        } else if crate::sandbox::netns_per_run() {
            json!("per run")
        } else {
            json!("per helper, empty")
        },
        "root": if jailed { "bind mounts, read-only" } else { "host" },
        "seccomp": if jailed && user_notif { json!("deny list, user notification") } else { json!(null) },
        "no_new_privs": true,
        "capabilities": if jailed { "all dropped" } else { "none held" },
        "cgroup": m.cgroup.as_ref().map(|h| h.kind),
        "cgroup_layout": match &placed {
            Ok(Some(h)) => match &h.layout {
                Some(l) => {
                    let mut v = json!(l);
                    v["why"] = json!(l.why());
                    v
                }
                None => json!({"layout": "v1", "why": "cgroup v1: per controller, below the judge's own cgroup"}),
            },
            Ok(None) => json!(null),
            Err(e) => json!({"layout": null, "error": e.to_string()}),
        },
        "cgroup_controllers": if m.cgroup.is_some() { json!(["memory", "pids", "cpu"]) } else { json!([]) },
        "memory": if m.cgroup.is_some() { "cgroup peak less file cache" } else { "ru_maxrss and /proc samples" },
        "cpu": if m.cgroup.is_some() { "cgroup" } else { "rusage and /proc samples" },
        "rlimits": ["CPU", "AS", "STACK", "FSIZE", "NPROC", "CORE"],
        "oom_score_adj": if jailed && m.cgroup.is_some() {
            json!({"helper": crate::sandbox::helper_oom_score_adj(), "runs": crate::sandbox::jail::OOM_FIRST.parse::<i32>().ok()})
        } else {
            json!(null)
        },
        "trial": trial,
        "languages": languages.all().iter().map(|l| {
            let missing = l.missing();
            json!({"id": l.id, "name": l.name, "toolchain": if missing.is_empty() { "found" } else { "missing" },
                "missing": missing})
        }).collect::<Vec<_>>(),
    });
    println!("{v}");
    if let Err(e) = placed {
        error!("{e}");
        ExitCode::Config
    } else if ok {
        ExitCode::Ok
    } else {
        ExitCode::Failure
    }
}
